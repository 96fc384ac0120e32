"""A workflow app for the child-run crash test: a parent fans out to many children.

Each child's step logs its run id to ``$CHILDAPP_LOG`` when it starts.
"""

from __future__ import annotations

import os

import anyio

from workflow import Unique, get_step_metadata, start, step, workflow


@step(retry_delay=0.0)
async def label(order: int) -> str:
    with open(os.environ["CHILDAPP_LOG"], "a") as log:
        log.write(f"{get_step_metadata().run_id}\n")
        log.flush()
        os.fsync(log.fileno())
    await anyio.sleep(0.05)
    return f"label-{order}"


@workflow
async def ship(order: int) -> str:
    return await label(order)


@workflow
async def fan_out(count: int) -> list[str]:
    kids = [await start(ship, i, attributes={"order": Unique(f"fan-{i}")}) for i in range(count)]
    return [await kid.result() for kid in kids]
