"""``workflow.testing``: the TestEnvironment users test their workflows with."""

from __future__ import annotations

from datetime import datetime, timedelta
from unittest.mock import AsyncMock

import anyio
import pytest

from workflow import (
    HookNotFoundError,
    RunFailedError,
    RunStatus,
    Unique,
    create_hook,
    get_step_metadata,
    now,
    set_attribute,
    sleep,
    step,
    workflow,
)
from workflow.testing import TestEnvironment

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


async def test_an_error_raised_in_the_environment_block_leaves_as_itself() -> None:
    """``except ValueError`` around ``async with TestEnvironment()`` catches a ValueError
    raised in the block, not an ExceptionGroup (issue 24)."""
    problem = ValueError("raised in the block")
    caught: BaseException | None = None
    try:
        async with TestEnvironment(workflows=[approval]) as env:
            await env.start(approval, "o-err")
            raise problem
    except ValueError as exc:
        caught = exc
    assert caught is problem
