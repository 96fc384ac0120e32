"""The ``workflow.schedules`` API: bad input, handles, trigger, backfill, time zones, catchup.

Scenarios that need time to pass use a memory world whose clock the test
moves (``MemoryWorld(clock=...)``), so an hour of fire times takes a moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import anyio
import pytest

import worlds
from workflow import RunFailedError, RunStatus, Worker, list_runs, set_attribute, start, workflow
from workflow.schedules import (
    Overlap,
    Schedule,
    ScheduleExistsError,
    ScheduleNotFoundError,
    create_schedule,
    get_schedule,
    list_schedules,
)
from worlds.memory import MemoryWorld
from worlds.protocol import World
from worlds.types import ScheduleFire, ScheduleRecord

pytestmark = pytest.mark.anyio

MINUTE = timedelta(minutes=1)


@workflow
async def report(region: str) -> str:
    return region


async def _fire_times(world: World, schedule_id: str) -> list[datetime]:
    runs = await list_runs(attributes={"$schedule": schedule_id}, limit=1000, world=world)
    times: list[datetime] = []
    for run in runs:
        at = (await run.attributes())["$scheduled_at"]
        assert isinstance(at, datetime)
        times.append(at)
    return sorted(times)


@pytest.fixture
async def memory() -> AsyncIterator[World]:
    async with worlds.open("memory://") as world:
        yield world


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        # half past a minute, ahead of the real clock: fire times never fall on "now"
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        self.now = minute + timedelta(minutes=1, seconds=30)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"cron": "61 * * * *"}, ValueError, "not a valid cron"),
        ({"cron": "every day"}, ValueError, "not a valid cron"),
        ({"cron": 5}, TypeError, "cron must be a str"),
        ({"cron": "0 3 * * *", "timezone": "Mars/Olympus"}, ValueError, "unknown timezone"),
        ({"every": timedelta(0)}, ValueError, "1 second to 100 years"),
        ({"every": -1}, ValueError, "1 second to 100 years"),
        ({"every": "1s"}, TypeError, "timedelta or seconds"),
        ({"cron": "0 3 * * *", "every": MINUTE}, ValueError, "exactly one of"),
        ({}, ValueError, "exactly one of"),
        ({"every": MINUTE, "timezone": "Europe/Paris"}, ValueError, "applies to cron"),
        ({"every": MINUTE, "catchup_window": -MINUTE}, ValueError, "catchup_window"),
        ({"every": MINUTE, "catchup_window": 60}, TypeError, "catchup_window"),
        ({"every": MINUTE, "overlap": "skip"}, TypeError, "Overlap"),
        ({"every": MINUTE, "key": "report"}, ValueError, "together"),
        ({"every": MINUTE, "key": "$name", "value": "x"}, ValueError, "reserved"),
        ({"every": MINUTE, "attributes": {"$schedule": "x"}}, ValueError, "only by schedules"),
        ({"every": MINUTE, "attributes": {"team": ["a"]}}, TypeError, "no nesting"),
    ],
)
async def test_bad_input_is_refused_and_nothing_written(
    memory: World, options: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await create_schedule(report, "eu", id="bad", world=memory, **options)  # type: ignore[arg-type]
    assert [s async for s in list_schedules(world=memory)] == []


@pytest.mark.parametrize("bad_id", ["", "no spaces", "x" * 192, "a/b"])
async def test_a_bad_id_is_refused(memory: World, bad_id: str) -> None:
    with pytest.raises(ValueError, match="schedule id"):
        await create_schedule(report, "eu", id=bad_id, every=MINUTE, world=memory)
    with pytest.raises(ValueError, match="schedule id"):
        get_schedule(bad_id, world=memory)


async def test_a_duplicate_id_is_refused_and_the_first_kept(memory: World) -> None:
    await create_schedule(report, "eu", id="daily-report", cron="0 3 * * *", world=memory)
    with pytest.raises(ScheduleExistsError, match="already exists") as caught:
        await create_schedule(report, "us", id="daily-report", every=MINUTE, world=memory)
    assert isinstance(caught.value, ValueError)
    info = await get_schedule("daily-report", world=memory).describe()
    assert (info.cron, info.every) == ("0 3 * * *", None)


async def test_a_catchup_window_under_a_second_counts_as_one(memory: World) -> None:
    sched = await create_schedule(
        report, "eu", id="c", every=MINUTE, catchup_window=timedelta(0), world=memory
    )
    assert (await sched.describe()).catchup_window == timedelta(seconds=1)


async def test_only_workflows_can_be_scheduled(memory: World) -> None:
    with pytest.raises(TypeError, match="@workflow"):
        await create_schedule(print, id="x", every=MINUTE, world=memory)  # type: ignore[arg-type]


async def test_users_cannot_set_the_reserved_schedule_attributes(memory: World) -> None:
    for key in ("$schedule", "$scheduled_at"):
        with pytest.raises(ValueError, match="only by schedules"):
            await start(report, "eu", attributes={key: "x"}, world=memory)


# ---------------------------------------------------------------------- handles


async def test_describe_reports_the_definition_and_next_fire_times(memory: World) -> None:
    sched = await create_schedule(
        report,
        "eu",
        id="daily-report",
        cron="0 3 * * *",
        timezone="Europe/Paris",
        overlap=Overlap.BUFFER_ONE,
        catchup_window=timedelta(hours=1),
        attributes={"team": "data"},
        key="report",
        value="daily",
        world=memory,
    )
    assert sched == get_schedule("daily-report", world=memory)
    info = await sched.describe()
    assert (info.id, info.workflow, info.cron, info.timezone) == (
        "daily-report",
        "report",
        "0 3 * * *",
        "Europe/Paris",
    )
    assert info.overlap is Overlap.BUFFER_ONE and info.catchup_window == timedelta(hours=1)
    assert info.attributes == {"team": "data"} and (info.key, info.value) == ("report", "daily")
    assert not info.paused and info.recent_run_ids == [] and info.buffered_at is None
    assert len(info.next_fire_times) == 5
    for moment in info.next_fire_times:
        local = moment.astimezone(ZoneInfo("Europe/Paris"))
        assert (local.hour, local.minute) == (3, 0)
        assert moment > datetime.now(UTC)


async def test_trigger_starts_a_run_with_the_schedule_attributes(memory: World) -> None:
    sched = await create_schedule(
        report, "eu", id="t", every=timedelta(hours=1), attributes={"team": "data"}, world=memory
    )
    run = await sched.trigger()
    assert run is not None
    attributes = await run.attributes()
    assert attributes["$schedule"] == "t" and attributes["team"] == "data"
    assert isinstance(attributes["$scheduled_at"], datetime)
    assert (await sched.describe()).recent_run_ids == [run.id]
    # SKIP: the first run is still open (no worker), so a second trigger starts nothing
    assert await sched.trigger() is None
    async with Worker(memory, [report]):
        assert await run.result(timeout=10) == "eu"
    again = await sched.trigger()
    assert again is not None and again != run


async def test_trigger_under_buffer_one_buffers_the_fire(memory: World) -> None:
    sched = await create_schedule(
        report, "eu", id="b", every=timedelta(hours=1), overlap=Overlap.BUFFER_ONE, world=memory
    )
    first = await sched.trigger()
    assert first is not None
    assert await sched.trigger() is None
    buffered = (await sched.describe()).buffered_at
    assert buffered is not None
    assert await sched.trigger() is None
    assert (await sched.describe()).buffered_at == buffered  # at most one waits
    async with Worker(memory, [report], poll_interval=0.05):
        with anyio.fail_after(10):
            while len(await _fire_times(memory, "b")) < 2:
                await anyio.sleep(0.05)
    assert buffered in await _fire_times(memory, "b")
    assert (await sched.describe()).buffered_at is None


async def test_backfill_fires_each_time_in_the_range_once(memory: World) -> None:
    sched = await create_schedule(
        report, "eu", id="bf", cron="*/15 * * * *", overlap=Overlap.ALLOW_ALL, world=memory
    )
    t0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    runs = await sched.backfill(t0, t0 + timedelta(hours=1))
    expected = [t0 + timedelta(minutes=15 * i) for i in range(4)]
    assert await _fire_times(memory, "bf") == expected
    again = await sched.backfill(t0 - timedelta(minutes=15), t0 + timedelta(minutes=31))
    assert [run.id for run in again][1:] == [run.id for run in runs][:3]
    assert len(await _fire_times(memory, "bf")) == 5


async def test_backfill_starts_every_fire_time_unless_given_a_rule(memory: World) -> None:
    sched = await create_schedule(report, "eu", id="skipper", every=MINUTE, world=memory)
    t0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    # no worker: every run stays open, yet the default starts each fire time
    assert len(await sched.backfill(t0, t0 + 3 * MINUTE)) == 3
    later = t0 + timedelta(hours=1)
    skipped = await sched.backfill(later, later + 3 * MINUTE, overlap=Overlap.SKIP)
    assert len(skipped) == 1  # its run claims $schedule=skipper and stays open: 2 skipped
    with pytest.raises(TypeError, match="Overlap"):
        await sched.backfill(later, later + MINUTE, overlap="skip")  # type: ignore[arg-type]
    assert len(await _fire_times(memory, "skipper")) == 4


async def test_backfill_refuses_bad_ranges(memory: World) -> None:
    sched = await create_schedule(report, "eu", id="r", every=MINUTE, world=memory)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="start < end"):
        await sched.backfill(t0, t0)
    with pytest.raises(ValueError, match="aware"):
        await sched.backfill(datetime(2026, 1, 1), t0)
    with pytest.raises(ValueError, match="more than"):
        await sched.backfill(t0, t0 + timedelta(days=30))
    assert await _fire_times(memory, "r") == []


async def test_list_pause_unpause_and_delete(memory: World) -> None:
    for name in ("b", "a", "c"):
        await create_schedule(report, name, id=name, every=MINUTE, world=memory)
    listed = [s async for s in list_schedules(world=memory)]
    assert [s.id for s in listed] == ["a", "b", "c"]
    assert all(isinstance(s, Schedule) and s.info is not None for s in listed)
    b = get_schedule("b", world=memory)
    await b.pause(note="migration")
    info = await b.describe()
    assert info.paused and info.note == "migration"
    await b.unpause()
    assert not (await b.describe()).paused
    await b.delete()
    assert [s.id async for s in list_schedules(world=memory)] == ["a", "c"]
    for call in (b.describe, b.pause, b.unpause, b.trigger, b.delete):
        with pytest.raises(ScheduleNotFoundError):
            await call()


# ---------------------------------------------------------------------- time zones


async def test_cron_follows_croniter_across_daylight_saving(memory: World) -> None:
    sched = await create_schedule(
        report,
        "eu",
        id="paris",
        cron="30 2 * * *",
        timezone="Europe/Paris",
        overlap=Overlap.ALLOW_ALL,
        world=memory,
    )
    spring = await sched.backfill(
        datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)
    )
    fall = await sched.backfill(
        datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC)
    )
    assert len(spring) == 3 and len(fall) == 4
    z = UTC
    assert await _fire_times(memory, "paris") == [
        datetime(2026, 3, 28, 1, 30, tzinfo=z),  # 02:30 CET
        datetime(2026, 3, 29, 1, 0, tzinfo=z),  # 02:30 does not exist: 03:00 CEST
        datetime(2026, 3, 30, 0, 30, tzinfo=z),  # 02:30 CEST
        datetime(2026, 10, 24, 0, 30, tzinfo=z),  # 02:30 CEST
        datetime(2026, 10, 25, 0, 30, tzinfo=z),  # 02:30 CEST, the first of two
        datetime(2026, 10, 25, 1, 30, tzinfo=z),  # 02:30 CET, the second
        datetime(2026, 10, 26, 1, 30, tzinfo=z),  # 02:30 CET
    ]


async def test_every_fires_on_multiples_of_the_interval_in_utc(memory: World) -> None:
    sched = await create_schedule(
        report, "eu", id="five", every=timedelta(minutes=5), overlap=Overlap.ALLOW_ALL, world=memory
    )
    t0 = datetime(2026, 3, 29, 0, 58, 7, tzinfo=UTC)
    await sched.backfill(t0, t0 + timedelta(minutes=12))
    times = await _fire_times(memory, "five")
    assert [(t.hour, t.minute, t.second) for t in times] == [(1, 0, 0), (1, 5, 0), (1, 10, 0)]


# ---------------------------------------------------------------------- catchup (fake clock)


async def _settle(world: World, schedule_id: str, count: int) -> list[datetime]:
    """Wait until the schedule has ``count`` runs (and no more appear for a moment)."""
    with anyio.fail_after(15):
        while len(await _fire_times(world, schedule_id)) < count:
            await anyio.sleep(0.05)
    await anyio.sleep(0.3)
    return await _fire_times(world, schedule_id)


async def _in_worker(world: World, body: Callable[[], object]) -> None:
    async with Worker(world, [report], poll_interval=0.02):
        await body()  # type: ignore[misc]


async def test_unpause_runs_only_fires_within_the_catchup_window() -> None:
    clock = FakeClock()
    async with MemoryWorld(clock=clock) as world:
        sched = await create_schedule(
            report,
            "eu",
            id="hourly-catchup",
            every=MINUTE,
            overlap=Overlap.ALLOW_ALL,
            catchup_window=3 * MINUTE,
            world=world,
        )
        async with Worker(world, [report], poll_interval=0.02):
            clock.advance(MINUTE)
            first = await _settle(world, "hourly-catchup", 1)
            await sched.pause(note="an hour off")
            clock.advance(timedelta(hours=1))
            await anyio.sleep(0.3)
            assert await _fire_times(world, "hourly-catchup") == first
            await sched.unpause()
            times = await _settle(world, "hourly-catchup", 4)
        caught_up = times[len(first) :]
        assert len(caught_up) == 3, caught_up  # the fire times of the last 3 minutes
        assert caught_up[-1] <= clock.now < caught_up[-1] + MINUTE
        assert caught_up[0] >= clock.now - 3 * MINUTE


async def test_fires_missed_while_no_worker_ran_catch_up_within_the_window() -> None:
    clock = FakeClock()
    async with MemoryWorld(clock=clock) as world:
        await create_schedule(
            report,
            "eu",
            id="down",
            every=MINUTE,
            overlap=Overlap.ALLOW_ALL,
            catchup_window=2 * MINUTE,
            world=world,
        )
        clock.advance(timedelta(hours=5))
        async with Worker(world, [report], poll_interval=0.02):
            times = await _settle(world, "down", 2)
        assert len(times) == 2  # of 300 missed fire times, those of the last 2 minutes
        assert times[0] >= clock.now - 2 * MINUTE
        runs = await list_runs(attributes={"$schedule": "down"}, world=world)
        for run in runs:
            assert await run.status() is RunStatus.COMPLETED


class DiesMidFire:
    """A world whose first ``fire_schedules`` calls start the fires' runs and then
    fail before the schedules' new state is stored: as if the worker died between
    starting a fire and recording it (``Schedule.trigger`` starts fires so)."""

    def __init__(self, inner: World, failures: int) -> None:
        self.inner = inner
        self.failures = failures

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        if self.failures:
            self.failures -= 1
            for fire in fires:
                for each in fire.fires:
                    with contextlib.suppress(ValueError):  # started by an earlier round
                        await self.inner.create_run(each.request)
            raise ConnectionError("worker died before recording the fire")
        return await self.inner.fire_schedules(fires)


async def test_a_fire_retried_after_dying_mid_fire_starts_no_second_run(world: World) -> None:
    await create_schedule(
        report,
        "eu",
        id="retried",
        every=timedelta(seconds=1),
        overlap=Overlap.ALLOW_ALL,
        world=world,
    )
    dying = DiesMidFire(world, failures=3)
    async with Worker(dying, [report], poll_interval=0.05, lease_seconds=0.5):  # type: ignore[arg-type]
        with anyio.fail_after(20):
            while dying.failures or len(await _fire_times(world, "retried")) < 4:
                await anyio.sleep(0.1)
    times = await _fire_times(world, "retried")
    assert len(times) == len(set(times))
    assert all(b - a == timedelta(seconds=1) for a, b in pairwise(times)), times


@workflow
async def sets_schedule_key() -> None:
    await set_attribute("$schedule", "forged")


async def test_workflows_cannot_set_the_reserved_schedule_attributes(memory: World) -> None:
    async with Worker(memory, [sets_schedule_key]):
        run = await start(sets_schedule_key, world=memory)
        with pytest.raises(RunFailedError, match="only by schedules"):
            await run.result(timeout=10)
