"""Issue 24: schedules that could never work are refused at creation, on every world, and
the daylight-saving rule for cron (a repeated local time fires twice, or once on request)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from workflow import workflow
from workflow.schedules import Overlap, create_schedule, list_schedules
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@workflow(name="sched-bounds")
async def tick(n: int) -> int:
    return n


async def no_schedules(world: World) -> bool:
    return [s async for s in list_schedules(world=world)] == []


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4,6,9,11 *"])
async def test_a_cron_that_never_fires_is_refused(world: World, cron: str) -> None:
    with pytest.raises(ValueError, match="never fires"):
        await create_schedule(tick, 1, id="never", cron=cron, world=world)
    assert await no_schedules(world)


@pytest.mark.parametrize(
    "every",
    [
        math.inf,
        math.nan,
        -math.inf,
        1e20,
        0.0001,
        0.999,
        0,
        timedelta(milliseconds=1),
        timedelta.max,
        timedelta(days=101 * 365),
    ],
)
async def test_an_interval_outside_1_second_to_100_years_is_refused(
    world: World, every: Any
) -> None:
    with pytest.raises(ValueError, match="every must be 1 second to 100 years"):
        await create_schedule(tick, 1, id="flood", every=every, world=world)
    assert await no_schedules(world)


@pytest.mark.parametrize("every", [1, 1.0, timedelta(seconds=1), timedelta(days=365)])
async def test_the_shortest_interval_is_taken(world: World, every: Any) -> None:
    sched = await create_schedule(tick, 1, id="ok", every=every, world=world)
    expected = every if isinstance(every, timedelta) else timedelta(seconds=every)
    assert (await sched.describe()).every == expected


FALL_BACK_DAY = (datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC))


@pytest.mark.parametrize(("fall_back", "runs"), [(None, 4), ("twice", 4), ("once", 3)])
async def test_a_repeated_local_time_fires_twice_or_once(
    world: World, fall_back: str | None, runs: int
) -> None:
    """``30 2 * * *`` in Paris: 02:30 happens twice on 2026-10-25 (CEST, then CET)."""
    options: dict[str, Any] = {} if fall_back is None else {"fall_back": fall_back}
    sched = await create_schedule(
        tick, 1, id="paris", cron="30 2 * * *", timezone="Europe/Paris", world=world, **options
    )
    assert (await sched.describe()).fall_back == (fall_back or "twice")
    fired = await sched.backfill(*FALL_BACK_DAY, overlap=Overlap.ALLOW_ALL)
    assert len(fired) == runs
    times = [info.get("$scheduled_at") for info in [await run.attributes() for run in fired]]
    on_the_day = [t for t in times if str(t).startswith("2026-10-25")]
    assert len(on_the_day) == (1 if fall_back == "once" else 2)


async def test_a_skipped_local_time_fires_once_after_the_gap(world: World) -> None:
    sched = await create_schedule(
        tick,
        1,
        id="spring",
        cron="30 2 * * *",
        timezone="Europe/Paris",
        fall_back="once",
        world=world,
    )
    start = datetime(2026, 3, 28, tzinfo=UTC)
    fired = await sched.backfill(start, start + timedelta(days=3), overlap=Overlap.ALLOW_ALL)
    assert len(fired) == 3


@pytest.mark.parametrize(
    ("options", "names"),
    [
        ({"cron": "30 2 * * *", "fall_back": "never"}, "fall_back must be"),
        ({"cron": "30 2 * * *", "fall_back": True}, "fall_back must be"),
        ({"every": 60, "fall_back": "once"}, "fall_back= applies to cron"),
    ],
)
async def test_a_bad_fall_back_is_refused(
    world: World, options: dict[str, Any], names: str
) -> None:
    with pytest.raises(ValueError, match=names):
        await create_schedule(tick, 1, id="bad", world=world, **options)
    assert await no_schedules(world)
