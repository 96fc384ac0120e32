"""An idle worker's polls cost no query while nothing changes (``rfcs/0018``, "Idle cost"),
yet it still sees what another world object starts and what comes due by time.

The statements an idle worker sends are a benchmark figure
(``benchmarks/idle_cost.py``); these tests check that answering polls from
memory never loses work: a run started through another world object on the
same storage (as another process would), a durable timer, and a schedule,
each after the worker has been idle long enough for its polls to be answered
from memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import anyio
import pytest

from workflow import Worker, list_runs, sleep, start, workflow
from workflow.schedules import create_schedule
from worlds.protocol import World

pytestmark = pytest.mark.anyio

IDLE = 1.0
"""Seconds the worker idles first: several polls, answered from memory."""

WITHIN = 9.0
"""Less than the 10 s safety poll: what these tests wait for must be seen through the
change token or the due time, not found by the slow safety poll."""


@contextlib.asynccontextmanager
async def idle_worker(make_world: Callable[[], World]) -> AsyncIterator[World]:
    """A worker of ``echo`` on one world object, idle for ``IDLE`` seconds; yields another
    world object over the same storage (the memory world is one shared object)."""
    served, client = make_world(), make_world()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(served)
        if client is not served:
            await stack.enter_async_context(client)
        await stack.enter_async_context(Worker(served, [echo], poll_interval=0.05))
        await anyio.sleep(IDLE)
        yield client


@workflow
async def echo(x: int) -> int:
    return x


@workflow
async def naps(x: int) -> int:
    await sleep(1.5)
    return x


async def test_an_idle_worker_runs_what_another_world_object_starts(
    make_world: Callable[[], World],
) -> None:
    async with idle_worker(make_world) as client:
        run = await start(echo, 7, world=client)
        assert await run.result(timeout=WITHIN) == 7


async def test_an_idle_worker_wakes_for_a_timer_that_comes_due(world: World) -> None:
    async with Worker(world, [naps], poll_interval=0.05):
        run = await start(naps, 3, world=world)
        assert await run.result(timeout=WITHIN) == 3


async def test_an_idle_worker_fires_a_schedule_another_world_object_created(
    make_world: Callable[[], World],
) -> None:
    async with idle_worker(make_world) as client:
        await create_schedule(echo, 1, id="idle-fire", every=timedelta(seconds=1), world=client)
        with anyio.fail_after(WITHIN):
            while not await list_runs(attributes={"$schedule": "idle-fire"}, world=client):
                await anyio.sleep(0.05)
