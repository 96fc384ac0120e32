"""A workflow app for crash tests: each step body logs when it starts and ends.

The log file is named by ``$CRASHAPP_LOG``; lines are ``start|end run step attempt time``.
"""

from __future__ import annotations

import os
import time

import anyio

from workflow import get_step_metadata, step, workflow


def _log(kind: str) -> None:
    meta = get_step_metadata()
    line = f"{kind} {meta.run_id} {meta.step_id.rsplit('.', 1)[1]} {meta.attempt} {time.time()}\n"
    with open(os.environ["CRASHAPP_LOG"], "a") as log:
        log.write(line)
        log.flush()
        os.fsync(log.fileno())


@step(retry_delay=0.0)
async def slow_add(x: int, y: int) -> int:
    _log("start")
    await anyio.sleep(0.15)
    _log("end")
    return x + y


@workflow
async def chain(n: int, seed: int) -> int:
    total = seed
    for i in range(n):
        total = await slow_add(total, i)
    return total
