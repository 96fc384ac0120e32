"""``workflow.testing``: the TestEnvironment users test their workflows with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest.mock import AsyncMock

import anyio
import pytest
from msgspec.msgpack import encode

from workflow import (
    HookNotFoundError,
    RunCancelledError,
    RunFailedError,
    RunStatus,
    Unique,
    create_hook,
    get_run,
    get_step_metadata,
    list_runs,
    now,
    set_attribute,
    sleep,
    start,
    step,
    workflow,
)
from workflow.schedules import create_schedule
from workflow.testing import TestEnvironment
from worlds.semantics import new_run_id
from worlds.types import CreateRunRequest

pytestmark = pytest.mark.anyio

charged: list[tuple[str, int]] = []


@step(max_retries=2, retry_delay=3600)
async def charge(order_id: str, cents: int) -> str:
    raise AssertionError("the real charge step must not run in these tests")


@workflow
async def checkout(order_id: str, cents: int) -> str:
    await set_attribute("stage", "charging")
    receipt = await charge(order_id, cents)
    await sleep(timedelta(days=30))
    await set_attribute("stage", "paid")
    return "paid" if receipt.startswith("r-") else "declined"


@workflow
async def approval(order_id: str) -> dict[str, bool]:
    payload: dict[str, bool] = await create_hook(f"approve-{order_id}")
    return payload


@workflow
async def clock_reader() -> list[str]:
    first = now()
    await sleep(timedelta(hours=2))
    return [first.isoformat(), now().isoformat()]


async def fake_charge(order_id: str, cents: int) -> str:
    charged.append((order_id, cents))
    return f"r-{order_id}"


async def test_a_thirty_day_sleep_returns_at_once_with_the_fake_step() -> None:
    charged.clear()
    async with TestEnvironment(workflows=[checkout], steps={charge: fake_charge}) as env:
        before = env.now()
        run = await env.start(checkout, "o-1", 1999, attributes={"order": Unique("o-1")})
        with anyio.fail_after(10):  # hang detection only: the sleep is 30 days
            assert await run.result() == "paid"
        assert env.now() - before >= timedelta(days=30)
        assert charged == [("o-1", 1999)]
        assert (await run.attributes())["stage"] == "paid"
        assert (await env.world.find_claim("order", "o-1")) is not None
    # the real body is back once the environment closes
    with pytest.raises(AssertionError, match="real charge step"):
        await charge("o-2", 1)


attempts: list[int] = []


def flaky_charge(order_id: str, cents: int) -> str:
    """A plain def fake: runs in a thread, as a plain def step does."""
    attempts.append(get_step_metadata().attempt)
    if len(attempts) < 3:
        raise RuntimeError("card network down")
    return f"r-{order_id}"


async def test_a_replaced_step_keeps_the_real_steps_retries() -> None:
    attempts.clear()
    async with TestEnvironment(workflows=[checkout], steps={charge: flaky_charge}) as env:
        run = await env.start(checkout, "o-3", 5)
        with anyio.fail_after(10):
            assert await run.result() == "paid"
    assert attempts == [1, 2, 3]  # max_retries=2 of the real step: three attempts


def always_fails(order_id: str, cents: int) -> str:
    attempts.append(get_step_metadata().attempt)
    raise RuntimeError("no")


async def test_a_replaced_step_fails_after_the_real_steps_retry_budget() -> None:
    attempts.clear()
    async with TestEnvironment(workflows=[checkout], steps={charge: always_fails}) as env:
        run = await env.start(checkout, "o-4", 5)
        with anyio.fail_after(10), pytest.raises(RunFailedError) as failed:
            await run.result()
    assert "no" in failed.value.error_message
    assert attempts == [1, 2, 3]


async def test_hooks_resume_through_the_environment() -> None:
    async with TestEnvironment(workflows=[approval]) as env:
        run = await env.start(approval, "o-5")
        with anyio.fail_after(10):  # resume_hook waits until the run has created its hook
            resumed = await env.resume_hook("approve-o-5", {"ok": True})
            assert resumed == run
            assert await run.result() == {"ok": True}
        with pytest.raises(HookNotFoundError):
            await env.resume_hook("approve-o-5", {"ok": False})  # the run has closed


async def test_without_skipping_the_clock_moves_only_by_advance() -> None:
    async with TestEnvironment(workflows=[clock_reader], skip_time=False) as env:
        run = await env.start(clock_reader)
        await anyio.sleep(0.3)
        assert await run.status() is RunStatus.RUNNING  # a 2-hour timer, no skipping
        before = env.now()
        await env.advance(timedelta(hours=2))
        assert env.now() - before >= timedelta(hours=2)
        with anyio.fail_after(10):
            first, second = await run.result()
        assert (
            timedelta(hours=2) <= (_parse(second) - _parse(first)) < timedelta(hours=2, minutes=1)
        )


async def test_advance_refuses_going_back() -> None:
    async with TestEnvironment() as env:
        with pytest.raises(ValueError, match="forward only"):
            await env.advance(timedelta(seconds=-1))


async def test_steps_must_map_steps() -> None:
    with pytest.raises(TypeError, match="no @step"):
        TestEnvironment(steps={checkout: fake_charge})  # type: ignore[dict-item]


async def test_one_step_cannot_be_replaced_by_two_open_environments() -> None:
    async with TestEnvironment(steps={charge: fake_charge}):
        with pytest.raises(RuntimeError, match="already replaced"):
            async with TestEnvironment(steps={charge: fake_charge}):
                pass


async def test_the_workflow_env_fixture_is_open(workflow_env: TestEnvironment) -> None:
    run = await workflow_env.start(clock_reader)
    with anyio.fail_after(10):
        first, second = await run.result()
    assert _parse(second) - _parse(first) >= timedelta(hours=2)


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text)


@workflow
async def naps(hours: int) -> str:
    await sleep(timedelta(hours=hours))
    return "rested"


async def test_a_run_timeout_counts_from_the_environments_clock() -> None:
    async with TestEnvironment(workflows=[naps]) as env:
        first = await env.start(naps, 24 * 30)  # moves the clock a month ahead
        with anyio.fail_after(10):
            assert await first.result() == "rested"
        on_time = await env.start(naps, 1, timeout=timedelta(hours=2))
        late = await env.start(naps, 3, timeout=7200)
        with anyio.fail_after(10):
            assert await on_time.result() == "rested"
            with pytest.raises(RunFailedError, match="TimeoutError"):
                await late.result()


async def test_a_mock_can_stand_in_for_a_step() -> None:
    fake = AsyncMock(return_value="r-mocked")
    async with TestEnvironment(workflows=[checkout], steps={charge: fake}) as env:
        run = await env.start(checkout, "o-7", 42)
        with anyio.fail_after(10):
            assert await run.result() == "paid"
    fake.assert_awaited_once_with("o-7", 42)


# ---------------------------------------------------------------- issue 33.11: children


@workflow
async def kit_child(n: int) -> int:
    await sleep(timedelta(hours=1))
    return n * 2


@workflow
async def kit_parent(n: int) -> int:
    child = await start(kit_child, n)
    return await child.result() + 1


async def test_a_child_workflow_nobody_registered_runs() -> None:
    async with TestEnvironment() as env:  # kit_child is passed nowhere
        run = await env.start(kit_parent, 20)
        with anyio.fail_after(10):
            assert await run.result() == 41


async def test_a_child_workflow_nobody_registered_runs_under_the_fixture(
    workflow_env: TestEnvironment,
) -> None:
    run = await workflow_env.start(kit_parent, 1)
    with anyio.fail_after(10):
        assert await run.result() == 3


@workflow(name="kit-twin")
async def kit_twin() -> str:
    return "the one the parent sees"


@workflow
async def kit_twin_parent() -> str:
    child = await start(kit_twin)
    return await child.result()


async def test_of_two_workflows_with_one_name_the_child_is_the_one_its_parent_sees() -> None:
    @workflow(name="kit-twin")
    async def other_twin() -> str:
        return "another module's"

    async with TestEnvironment() as env:
        run = await env.start(kit_twin_parent)
        with anyio.fail_after(10):
            assert await run.result() == "the one the parent sees"
    assert other_twin.name == kit_twin.name  # both defined while the kit ran


async def test_a_run_of_a_workflow_no_module_defines_is_cancelled_naming_it() -> None:
    async with TestEnvironment() as env:
        request = CreateRunRequest(
            run_id=new_run_id(), workflow="nowhere.defined", args=encode([[], {}])
        )
        await env.world.create_run(request)
        with anyio.fail_after(10), pytest.raises(RunCancelledError) as cancelled:
            await get_run(request.run_id, world=env.world).result()
    assert "no @workflow named 'nowhere.defined' is defined in this process" in str(cancelled.value)


# ---------------------------------------------------------------- issue 33.12: schedules


@workflow
async def kit_tick() -> str:
    return "tick"


async def fire_times(env: TestEnvironment) -> list[datetime]:
    await env.wait_idle()
    runs = await list_runs(attributes={"$schedule": "hourly"}, world=env.world)
    times = [(await run.attributes())["$scheduled_at"] for run in runs]
    assert all(isinstance(t, datetime) for t in times)
    for run in runs:
        assert await run.status() is RunStatus.COMPLETED
    return sorted(t for t in times if isinstance(t, datetime))


START = datetime(2030, 1, 1, 0, 30, tzinfo=UTC)
HOURS = [datetime(2030, 1, 1, h, tzinfo=UTC) for h in (1, 2, 3)]


@pytest.mark.parametrize("skip_time", [True, False])
async def test_the_kits_clock_drives_schedules(skip_time: bool) -> None:
    async with TestEnvironment(start_time=START, skip_time=skip_time) as env:
        schedule = await create_schedule(kit_tick, id="hourly", every=3600, world=env.world)
        # the first fire time comes from the kit's clock, not the wall clock
        assert (await schedule.describe()).next_fire_times[0] == HOURS[0]
        for _ in range(3):
            await env.advance(timedelta(hours=1))
        assert await fire_times(env) == HOURS


@pytest.mark.parametrize("window", [timedelta(minutes=1), timedelta(days=1)])
async def test_one_jump_fires_every_schedule_time_it_passes_over(window: timedelta) -> None:
    async with TestEnvironment(start_time=START) as env:
        await create_schedule(
            kit_tick, id="hourly", every=3600, catchup_window=window, world=env.world
        )
        await env.advance(timedelta(hours=3))
        assert await fire_times(env) == HOURS


@workflow
async def kit_sleeper(hours: int) -> str:
    await sleep(timedelta(hours=hours))
    return "awake"


async def test_skip_time_stops_at_each_schedule_fire_on_the_way_to_a_timer() -> None:
    async with TestEnvironment(start_time=START) as env:
        await create_schedule(kit_tick, id="hourly", every=3600, world=env.world)
        run = await env.start(kit_sleeper, 3)  # wakes at 03:30
        with anyio.fail_after(10):
            assert await run.result() == "awake"
        assert await fire_times(env) == HOURS
        # with nothing but a schedule left, the skipping clock stands still
        before = env.now()
        await anyio.sleep(0.1)
        assert env.now() - before < timedelta(minutes=1)
        assert await fire_times(env) == HOURS
