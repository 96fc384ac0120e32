"""Schedules on every world: the done-when of issue 14 through the public API.

Each scenario runs real workers against memory, SQLite and PostgreSQL with an
``every=1s`` schedule (the shortest interval the issue names), so a test
takes a few seconds of wall time; the timing assertions are about order and
counts of runs, never about speed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import anyio
import pytest

from tests.conftest import full_size
from workflow import Run, RunStatus, Worker, list_runs, sleep, workflow
from workflow.policies import start_with_policy
from workflow.schedules import Overlap, create_schedule
from worlds.protocol import World
from worlds.query import RunQuery
from worlds.types import RunRecord

pytestmark = pytest.mark.anyio

SECOND = timedelta(seconds=1)


@workflow
async def tick(label: str) -> str:
    return label


@workflow
async def nap(seconds: float) -> float:
    await sleep(seconds)
    return seconds


async def _records(world: World, schedule_id: str) -> list[RunRecord]:
    """Every run the schedule started, oldest fire first, read in one query: a run per
    ``get_run`` after the listing could miss the run that cancelled a listed one, and
    count no run open in a takeover that kept one open throughout."""
    query = RunQuery(attributes={"$schedule": schedule_id}, limit=1000)
    found = (await world.list_runs(query)).runs
    return sorted(found, key=lambda record: record.attributes["$scheduled_at"])


async def _fired_since(world: World, schedule_id: str, at: datetime) -> list[RunRecord]:
    """The runs the schedule started for fire times from ``at`` on."""
    return [r for r in await _records(world, schedule_id) if r.attributes["$scheduled_at"] >= at]


def _never_overlap(records: list[RunRecord]) -> None:
    """Each run was created after the one before it closed (the newest may be open)."""
    ordered = sorted(records, key=lambda record: record.created_at)
    for before, after in pairwise(ordered):
        assert before.closed_at is not None, f"{before.id} still open when {after.id} started"
        assert after.created_at >= before.closed_at, (before, after)


async def _workers(
    make_world: Callable[[], World], count: int, seconds: float, stop: anyio.Event | None = None
) -> None:
    """Run ``count`` workers, each on its own world object, for ``seconds`` (or, given
    ``stop``, until it is set: then ``seconds`` is the deadline, a failure)."""
    opened = [make_world() for _ in range(count)]
    async with anyio.create_task_group() as group:
        for world in opened:

            async def serve(world: World = world) -> None:
                async with world, Worker(world, [tick, nap], poll_interval=0.05):
                    if stop is None:
                        await anyio.sleep(seconds)
                    else:
                        with anyio.fail_after(seconds):
                            await stop.wait()

            group.start_soon(serve)


FIRING = full_size(5, 10)
"""Seconds two workers serve an every-second schedule (10 at full size)."""


@pytest.mark.slow
async def test_two_workers_start_one_run_per_fire_time(
    world: World, make_world: Callable[[], World]
) -> None:
    created = anyio.current_time()
    await create_schedule(
        tick, "x", id="every-second", every=SECOND, overlap=Overlap.ALLOW_ALL, world=world
    )
    await _workers(make_world, 2, float(FIRING))
    # the fire times lie between the schedule's creation and the workers' end: a loaded
    # machine takes a while to start the workers, which then catch the missed ones up
    elapsed = anyio.current_time() - created
    records = await _records(world, "every-second")
    times = [record.attributes["$scheduled_at"] for record in records]
    assert len(times) == len(set(times)), "a fire time started two runs"
    assert FIRING - 2 <= len(times) <= elapsed + 1
    assert all(b - a == SECOND for a, b in pairwise(times)), times
    assert all(t.microsecond == 0 for t in times)
    for record in records:
        assert record.workflow == "tick"
        assert record.status is RunStatus.COMPLETED


async def test_skip_never_has_two_runs_open(world: World, make_world: Callable[[], World]) -> None:
    await create_schedule(nap, 1.6, id="skip", every=SECOND, overlap=Overlap.SKIP, world=world)
    await _workers(make_world, 2, 6.5)
    records = await _records(world, "skip")
    assert 2 <= len(records) <= 4, records  # a run lasts ~2 fire times: about half are skipped
    _never_overlap(records)
    assert sum(1 for r in records if not r.status.is_closed) <= 1


async def test_buffer_one_keeps_one_fire_waiting(
    world: World, make_world: Callable[[], World]
) -> None:
    sched = await create_schedule(
        nap, 2.2, id="buffer", every=SECOND, overlap=Overlap.BUFFER_ONE, world=world
    )
    seen_buffered: list[datetime] = []

    async def watch() -> None:
        for _ in range(60):
            info = await sched.describe()
            if info.buffered_at is not None:
                seen_buffered.append(info.buffered_at)
            await anyio.sleep(0.1)

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        await _workers(make_world, 2, 7.0)
    records = await _records(world, "buffer")
    _never_overlap(records)
    assert seen_buffered, "no fire ever waited behind an open run"
    waited = [
        after
        for before, after in pairwise(records)
        if before.closed_at is not None
        and after.attributes["$scheduled_at"] < before.closed_at <= after.created_at
    ]
    assert waited, "no run started from a buffered fire once the open run closed"
    assert 2 <= len(records) <= 4


async def test_cancel_other_leaves_exactly_one_open(
    world: World, make_world: Callable[[], World]
) -> None:
    await create_schedule(
        nap, 60.0, id="newest", every=SECOND, overlap=Overlap.CANCEL_OTHER, world=world
    )
    open_counts: list[int] = []

    async def watch() -> None:
        await anyio.sleep(2.5)
        for _ in range(20):
            records = await _records(world, "newest")
            open_counts.append(sum(1 for r in records if not r.status.is_closed))
            await anyio.sleep(0.1)

    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        await _workers(make_world, 2, 5.0)
    records = await _records(world, "newest")
    assert set(open_counts) == {1}, open_counts
    assert [r.status for r in records[:-1]] == [RunStatus.CANCELLED] * (len(records) - 1)
    assert not records[-1].status.is_closed
    assert len(records) >= 3
    for run in records[:-1]:
        assert (await Run(run.id, world=world).claims()) == []


async def test_pause_stops_fires_and_unpause_resumes_within_the_catchup_window(
    world: World, make_world: Callable[[], World]
) -> None:
    sched = await create_schedule(
        tick,
        "p",
        id="pausable",
        every=SECOND,
        overlap=Overlap.ALLOW_ALL,
        catchup_window=2 * SECOND,
        world=world,
    )
    stop = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(_workers, make_world, 1, 120.0, stop)
        await anyio.sleep(1.5)
        await sched.pause(note="migration")
        paused_at = datetime.now(UTC)
        info = await sched.describe()
        assert info.paused and info.note == "migration"
        await anyio.sleep(4.0)
        during = [r for r in await _records(world, "pausable") if r.created_at > paused_at + SECOND]
        assert during == [], "a paused schedule fired"
        await sched.unpause()
        unpaused_at = datetime.now(UTC)
        with anyio.fail_after(60):  # until two fire times after the unpause started runs
            while len(await _fired_since(world, "pausable", unpaused_at)) < 2:
                await anyio.sleep(0.1)
        stop.set()
    records = await _records(world, "pausable")
    caught_up = [r for r in records if r.attributes["$scheduled_at"] < unpaused_at]
    caught_up = [r for r in caught_up if r.attributes["$scheduled_at"] > paused_at + SECOND]
    # The pause covered ~5 fire times; only those within 2 s of the unpause run.
    assert len(caught_up) <= 3, [r.attributes["$scheduled_at"] for r in caught_up]
    assert len(await _fired_since(world, "pausable", unpaused_at)) >= 2, "unpause did not resume"
    assert not (await sched.describe()).paused


async def _resumed_after(world: World, run_id: str) -> bool:
    """Whether run ``run_id`` closed and a run of the schedule was created after it."""
    closed = await world.get_run(run_id)
    if closed is None or closed.closed_at is None:
        return False
    for run in await list_runs(attributes={"report": "daily"}, limit=1000, world=world):
        record = await world.get_run(run.id)
        scheduled = record is not None and "$schedule" in record.attributes
        if scheduled and record is not None and record.created_at >= closed.closed_at:
            return True
    return False


async def test_a_shared_pair_never_overlaps_start_with_policy(
    world: World, make_world: Callable[[], World]
) -> None:
    await create_schedule(
        nap,
        0.3,
        id="report",
        every=SECOND,
        overlap=Overlap.SKIP,
        key="report",
        value="daily",
        world=world,
    )
    by_hand: list[str] = []

    async def webhook_starts() -> None:
        """After the schedule ran alone a while, start the report by hand (3 s long)."""
        await anyio.sleep(2.5)
        with anyio.fail_after(10):
            while not by_hand:
                run = await start_with_policy(nap, 3.0, key="report", value="daily", world=world)
                if "$schedule" not in await run.attributes():
                    by_hand.append(run.id)
                else:  # the schedule's run is open: the policy returned it
                    await anyio.sleep(0.05)
        for _ in range(10):  # while it runs, more starts by hand get the same run
            again = await start_with_policy(nap, 3.0, key="report", value="daily", world=world)
            assert again.id == by_hand[0]
            await anyio.sleep(0.1)
        # the workers serve until the schedule started again after the run by hand
        # closed (however loaded the machine), within a deadline that fails the test
        while not await _resumed_after(world, by_hand[0]):
            await anyio.sleep(0.1)
        resumed.set()

    resumed = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(webhook_starts)
        await _workers(make_world, 2, 60.0, stop=resumed)
    runs = await list_runs(attributes={"report": "daily"}, limit=1000, world=world)
    records = [r for r in [await world.get_run(run.id) for run in runs] if r is not None]
    scheduled = [r for r in records if "$schedule" in r.attributes]
    manual = [r for r in records if "$schedule" not in r.attributes]
    assert [r.id for r in manual] == by_hand
    assert scheduled, "the schedule started no run"
    _never_overlap(records)
    (hand,) = manual
    assert hand.closed_at is not None
    assert any(r.created_at >= hand.closed_at for r in scheduled), "the schedule did not resume"
