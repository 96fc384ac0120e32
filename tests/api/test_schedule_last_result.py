"""Schedules keep the last completed run's result and buffer every fire (issue 28, item 3).

``describe().last_result`` in the spirit of Temporal's
``test_schedule_last_completion_result``: after each completed run the schedule
reports that run's result; a failed run leaves it as it was. ``Overlap.BUFFER_ALL``:
every fire that overlaps waits, and the runs go one at a time in fire order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import anyio
import pytest

from workflow import RunFailedError, Worker, get_attribute, list_runs, step, workflow
from workflow.schedules import Overlap, create_schedule, list_schedules
from worlds.protocol import World
from worlds.types import RunRecord

pytestmark = pytest.mark.anyio

SECOND = timedelta(seconds=1)


@workflow
async def labelled(label: str) -> dict[str, Any]:
    at = await get_attribute("$scheduled_at")
    assert isinstance(at, datetime)
    if label == "fail":
        raise RuntimeError("this fire fails")
    return {"label": label, "at": at.isoformat()}


@step
async def busy_for(seconds: float) -> float:
    # real time, not a durable timer: a queued run's timer counts from its creation
    await anyio.sleep(seconds)
    return seconds


@workflow
async def queued_nap(seconds: float) -> float:
    return await busy_for(seconds)


async def test_last_result_follows_the_run_that_completed_last(world: World) -> None:
    sched = await create_schedule(
        labelled, "ok", id="last-result", every=timedelta(hours=1), paused=True, world=world
    )
    info = await sched.describe()
    assert info.last_result is None and info.last_completed_run_id is None
    async with Worker(world, [labelled]):
        first = await sched.trigger()
        assert first is not None
        one = await first.result(timeout=60)
        info = await sched.describe()
        assert info.last_result == one and info.last_completed_run_id == first.id
        second = await sched.trigger()
        assert second is not None
        two = await second.result(timeout=60)
    assert two != one
    info = await sched.describe()
    assert info.last_result == two and info.last_completed_run_id == second.id


async def test_a_failed_run_leaves_last_result_as_it_was(world: World) -> None:
    good = await create_schedule(
        labelled, "ok", id="lr-good", every=timedelta(hours=1), paused=True, world=world
    )
    bad = await create_schedule(
        labelled, "fail", id="lr-bad", every=timedelta(hours=1), paused=True, world=world
    )
    async with Worker(world, [labelled]):
        done = await good.trigger()
        assert done is not None
        expected = await done.result(timeout=60)
        failing = await bad.trigger()
        assert failing is not None
        with pytest.raises(RunFailedError):
            await failing.result(timeout=60)
    assert (await good.describe()).last_result == expected
    info = await bad.describe()
    assert info.last_result is None and info.last_completed_run_id is None
    # list_schedules reads no runs
    listed = [s async for s in list_schedules(world=world)]
    assert all(s.info is not None and s.info.last_result is None for s in listed)


async def _records(world: World, schedule_id: str) -> list[RunRecord]:
    runs = await list_runs(attributes={"$schedule": schedule_id}, limit=1000, world=world)
    found = [await world.get_run(run.id) for run in runs]
    return sorted((r for r in found if r is not None), key=lambda r: r.attributes["$scheduled_at"])


async def _serve(make_world: Callable[[], World], count: int, seconds: float) -> None:
    async with anyio.create_task_group() as group:
        for world in [make_world() for _ in range(count)]:

            async def serve(world: World = world) -> None:
                async with world, Worker(world, [queued_nap], poll_interval=0.05):
                    await anyio.sleep(seconds)

            group.start_soon(serve)


async def test_buffer_all_queues_every_fire_and_runs_them_in_order(
    world: World, make_world: Callable[[], World]
) -> None:
    await create_schedule(
        queued_nap, 1.5, id="buffer-all", every=SECOND, overlap=Overlap.BUFFER_ALL, world=world
    )
    await _serve(make_world, 2, 6.0)
    records = await _records(world, "buffer-all")
    fires = [r.attributes["$scheduled_at"] for r in records]
    assert isinstance(fires[0], datetime)
    # no fire was skipped: one run per second since the first, more than could run
    assert [b - a for a, b in pairwise(fires)] == [SECOND] * (len(fires) - 1)  # type: ignore[operator]
    started = [r for r in records if r.started_at is not None]
    assert 2 <= len(started) < len(records)
    # they ran one at a time, in fire order: each started once the one before closed
    assert started == records[: len(started)]
    for before, after in pairwise(started):
        assert before.closed_at is not None and after.started_at is not None
        assert after.started_at >= before.closed_at
    waiting = [r for r in records if r.started_at is None]
    assert all(r.status.value == "pending" for r in waiting)


async def test_buffer_all_backfill_and_trigger_queue_in_order(world: World) -> None:
    sched = await create_schedule(
        queued_nap,
        0.2,
        id="buffer-all-backfill",
        every=timedelta(hours=1),
        overlap=Overlap.BUFFER_ALL,
        paused=True,
        world=world,
    )
    start = datetime(2030, 1, 1, tzinfo=UTC)
    runs = await sched.backfill(start, start + timedelta(hours=3), overlap=Overlap.BUFFER_ALL)
    assert len(runs) == 3
    async with Worker(world, [queued_nap]):
        now = await sched.trigger()
        assert now is not None
        for run in [*runs, now]:
            assert await run.result(timeout=60) == 0.2
    records = [await world.get_run(run.id) for run in [*runs, now]]
    for before, after in pairwise(records):
        assert before is not None and after is not None
        assert before.closed_at is not None and after.started_at is not None
        assert after.started_at >= before.closed_at


async def test_buffer_all_takes_no_shared_pair(world: World) -> None:
    with pytest.raises(ValueError, match="BUFFER_ALL"):
        await create_schedule(
            queued_nap,
            1.0,
            id="buffer-all-pair",
            every=SECOND,
            overlap=Overlap.BUFFER_ALL,
            key="customer",
            value="c-1",
            world=world,
        )
    assert await world.get_schedule("buffer-all-pair") is None
