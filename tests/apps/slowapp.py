"""A workflow app for shutdown tests: each step takes ``$SLOWAPP_SECONDS`` (2 s) and
writes ``start`` and ``end`` lines with its attempt to ``$SLOWAPP_LOG``; ``slow`` is
``async def``, ``slow_in_thread`` a plain ``def`` (it runs in a thread)."""

from __future__ import annotations

import os
import time

import anyio

from workflow import get_step_metadata, step, workflow


def _log(kind: str) -> None:
    with open(os.environ["SLOWAPP_LOG"], "a") as log:
        log.write(f"{kind} {get_step_metadata().attempt}\n")


@step
async def slow() -> str:
    _log("start")
    await anyio.sleep(float(os.environ.get("SLOWAPP_SECONDS", "2")))
    _log("end")
    return "done"


@workflow
async def slow_flow() -> str:
    return await slow()


@step
def slow_in_thread() -> str:
    _log("start")
    time.sleep(float(os.environ.get("SLOWAPP_SECONDS", "2")))
    _log("end")
    return "done"


@workflow
async def slow_thread_flow() -> str:
    return await slow_in_thread()
