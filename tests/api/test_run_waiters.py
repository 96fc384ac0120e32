"""Many ``Run.result()`` calls in one process share one reader of the world (issue 33).

Each waiter used to re-read its own run about once a second (the SQLite world:
every 50 ms), so 2,000 waiters were 2,000 reads a second and the worker's timers
fired late. Now one waiter reads for all of them, woken by the world's
``RUNS_TOPIC`` or its poll interval.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from workflow import Run, Worker, start, workflow
from worlds.protocol import World
from worlds.query import RunPage, RunQuery
from worlds.types import EventKind, RunRecord
from worlds.wrapper import WorldWrapper

pytestmark = pytest.mark.anyio

WAITERS = 500


class CountingReads(WorldWrapper):
    """Counts the reads that can tell a waiter whether its run closed."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.reads = 0

    async def get_run(self, run_id: str) -> RunRecord | None:
        self.reads += 1
        return await super().get_run(run_id)

    async def list_runs(self, query: RunQuery) -> RunPage:
        self.reads += 1
        return await super().list_runs(query)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        self.reads += 1
        return await super().read_events(run_id, after_seq)


@workflow
async def echo(n: int) -> int:
    return n


def poll_seconds(world: World) -> float:
    """How often a reader may wake without any signal: the shared reader's interval,
    or the world's own poll interval if shorter (SQLite: 50 ms)."""
    return min(1.0, float(getattr(world, "poll_interval", math.inf)))


async def test_many_waiters_cost_one_reader_and_all_get_their_results(world: World) -> None:
    counting = CountingReads(world)
    runs = [await start(echo, n, world=world) for n in range(WAITERS)]  # pending: no worker
    results: dict[int, int] = {}

    async def wait(n: int, run: Run[Any]) -> None:
        results[n] = await get(run).result(timeout=120)

    def get(run: Run[Any]) -> Run[int]:
        return Run(run.id, world=counting, workflow=echo)

    async with anyio.create_task_group() as group:
        for n, run in enumerate(runs):
            group.start_soon(wait, n, run)
        # every waiter has read its run once and is waiting
        with anyio.fail_after(60):
            while counting.reads < WAITERS:
                await anyio.sleep(0.05)
        await anyio.sleep(2.0)  # the first few waited on their own runs: now they share too
        before, began = counting.reads, anyio.current_time()
        await anyio.sleep(2.5)
        reads, elapsed = counting.reads - before, anyio.current_time() - began
        # one batched read per wake-up of the one reader, however many wait: at most
        # a few per poll interval (each waiter reading on its own made it >= 500)
        wakeups = elapsed / poll_seconds(world) + 2
        assert reads <= 3 * wakeups, f"{reads} reads in {elapsed:.1f} s for {WAITERS} waiters"
        async with Worker(world, [echo]):
            with anyio.fail_after(120):
                while len(results) < WAITERS:
                    await anyio.sleep(0.05)
    assert results == {n: n for n in range(WAITERS)}


async def test_a_reader_that_gives_up_hands_over_to_another_waiter(world: World) -> None:
    """Enough impatient waiters that they share a reader, then one patient waiter:
    when the impatient ones (the reader among them) time out, the patient one
    takes over reading and still gets its result."""
    counting = CountingReads(world)
    impatient = [
        Run((await start(echo, n, world=world)).id, world=counting, workflow=echo)
        for n in range(20)  # more than the few that would each wait on their own run
    ]
    patient = Run((await start(echo, -1, world=world)).id, world=counting, workflow=echo)
    timed_out: list[int] = []
    got: list[int] = []

    async def give_up(run: Run[int]) -> None:
        try:
            await run.result(timeout=1.5)
        except TimeoutError:
            timed_out.append(1)

    async def wait() -> None:
        got.append(await patient.result(timeout=60))

    async with anyio.create_task_group() as group:
        for run in impatient:
            group.start_soon(give_up, run)
        with anyio.fail_after(10):
            while counting.reads < len(impatient):  # all of them are waiting
                await anyio.sleep(0.01)
        group.start_soon(wait)
        with anyio.fail_after(10):
            while len(timed_out) < len(impatient):
                await anyio.sleep(0.01)
        async with Worker(world, [echo]):
            with anyio.fail_after(60):
                while not got:
                    await anyio.sleep(0.05)
    assert got == [-1]
