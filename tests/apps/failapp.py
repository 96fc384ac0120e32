"""A workflow app for the on_failure crash test: runs that fail after slow steps, and
their handler, which logs each time its step starts (``$FAILAPP_LOG``)."""

from __future__ import annotations

import os

import anyio

from workflow import get_step_metadata, step, workflow


@step(retry_delay=0.0)
async def slow(n: int) -> int:
    await anyio.sleep(0.1)
    return n


@step(retry_delay=0.0)
async def page(run_id: str) -> str:
    with open(os.environ["FAILAPP_LOG"], "a") as log:
        log.write(f"page {run_id} {get_step_metadata().attempt}\n")
        log.flush()
        os.fsync(log.fileno())
    await anyio.sleep(0.1)
    return run_id


@workflow
async def on_doomed(run_id: str, error: dict[str, str]) -> str:
    return f"{await page(run_id)}: {error['message']}"


@workflow(on_failure=on_doomed)
async def doomed(steps: int, tag: int) -> None:
    for n in range(steps):
        await slow(n)
    raise RuntimeError(f"doomed {tag}")
