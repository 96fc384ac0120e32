"""The workflows of the chaos suite (``benchmarks/chaos.py``): ``wf worker`` runs them.

Every step body writes a journal line when it starts and when it ends, to the
file ``$CHAOS_JOURNAL`` (appended, flushed and fsynced, so a killed process
loses nothing it wrote)::

    start|end RUN_ID STEP ATTEMPT PID TIME

The suite compares the journal with the runs' event logs.
"""

from __future__ import annotations

import os
import time

import anyio

from workflow import get_step_metadata, step, workflow

STEP_SECONDS = float(os.environ.get("CHAOS_STEP_SECONDS", "0.1"))
"""How long each step body takes (awaiting, so a worker runs many at once)."""


def _journal(kind: str) -> None:
    meta = get_step_metadata()
    number = meta.step_id.rsplit(".", 1)[1]
    line = f"{kind} {meta.run_id} {number} {meta.attempt} {os.getpid()} {time.time():.6f}\n"
    with open(os.environ["CHAOS_JOURNAL"], "a") as journal:
        journal.write(line)
        journal.flush()
        os.fsync(journal.fileno())


@step(retry_delay=0.0)
async def add(total: int, i: int) -> int:
    """One unit of work: a short await between two journal lines."""
    _journal("start")
    await anyio.sleep(STEP_SECONDS)
    _journal("end")
    return total + i


@workflow
async def chain(steps: int, seed: int) -> int:
    """``steps`` steps one after the other; returns ``seed + sum(range(steps))``."""
    total = seed
    for i in range(steps):
        total = await add(total, i)
    return total


@workflow
async def holder(value: str) -> str:
    """A run that holds its unique ``slot`` attribute (claimed at start) and ends."""
    return value
