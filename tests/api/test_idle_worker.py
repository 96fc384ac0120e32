"""An idle worker's polls cost no query while nothing changes (``rfcs/0018``, "Idle cost"),
yet it still sees what another world object starts and what comes due by time.

The statements an idle worker sends per second are a benchmark figure
(``benchmarks/idle_cost.py``); here they are counted over a fixed number of
poll intervals, so a return to querying every poll fails the suite. The other
tests check that waiting on the world (``World.wait_idle``) never loses work: a
run started through another world object on the same storage (as another
process would), a durable timer, and a schedule, each after the worker has been
idle long enough for its polls to be answered from memory.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import timedelta

import anyio
import pytest

from benchmarks.sqlite_statements import SqliteStatements
from tests.world_calls import CountedWorld
from workflow import Worker, list_runs, sleep, start, workflow
from workflow.schedules import create_schedule
from worlds.protocol import World

pytestmark = pytest.mark.anyio

IDLE = 1.0
"""Seconds the worker idles first: several polls, answered from memory."""

POLL = 0.05
"""The idle worker's poll interval in these tests."""

POLLS = 40
"""Poll intervals over which an idle worker's calls are counted."""

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
async def unserved(x: int) -> int:
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


async def _settled(counted: CountedWorld) -> None:
    """Until the worker's first polls are done: its calls stop for ten poll intervals
    (a worker that never stops calling is counted after a while all the same)."""
    with anyio.move_on_after(200 * POLL):
        while True:
            before = counted.queries()
            await anyio.sleep(10 * POLL)
            if counted.queries() == before:
                return


async def test_an_idle_worker_calls_its_world_a_few_times_in_forty_polls(
    make_world: Callable[[], World],
) -> None:
    """Counts, not times. Polling every interval cost two calls a poll (work, schedules)
    and, on SQLite, statements with them; waiting on the world leaves, in forty poll
    intervals, at most one heartbeat, the two polls after it and one safety look (two
    polls): five calls; on SQLite the heartbeat's four statements and two looks."""
    with SqliteStatements() as statements:
        world = make_world()
        async with world:
            for n in range(3):
                await create_schedule(echo, n, id=f"hourly-{n}", cron="0 * * * *", world=world)
            counted = CountedWorld(world)
            async with Worker(counted, [echo], poll_interval=POLL):
                await _settled(counted)
                queries, sent = counted.queries(), statements.count
                await anyio.sleep(POLLS * POLL)
                queries, sent = counted.queries() - queries, statements.count - sent
    assert queries <= 5, counted.calls
    assert sent <= 6  # 0 on the worlds that are not SQLite


@pytest.mark.parametrize("world_kind", ["memory", "postgres"])
async def test_work_of_another_workflow_does_not_make_an_idle_worker_poll(
    make_world: Callable[[], World],
) -> None:
    """Work is announced by its name (``work_topic``): runs of a workflow this worker
    does not serve wake its wait, which sees that its own poll could find nothing
    more and waits on, without a call. Announced by the bare work topic, each of
    these starts cost the worker one poll. (SQLite's change token is its files,
    which every write moves: there a write costs a look per poll interval.)"""
    served, client = make_world(), make_world()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(served)
        if client is not served:
            await stack.enter_async_context(client)
        counted = CountedWorld(served)
        await stack.enter_async_context(Worker(counted, [echo], poll_interval=POLL))
        await _settled(counted)
        polls = counted.calls["lease"]
        for n in range(POLLS):
            await start(unserved, n, world=client)
            await anyio.sleep(POLL)
        polls = counted.calls["lease"] - polls
        assert len(await list_runs(workflow=unserved, world=client)) == POLLS
    assert polls <= 3, counted.calls
