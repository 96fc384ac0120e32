"""Cancellation with cleanup, its grace period, and run and step timeouts."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from workflow import (
    RunCancelledError,
    RunFailedError,
    RunStatus,
    StepFailedError,
    Worker,
    get_step_metadata,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import RunCancelRequested, StepCompleted, StepCreated, StepDiscarded

pytestmark = pytest.mark.anyio

seen: dict[str, list[str]] = {}


def note(what: str) -> None:
    seen.setdefault("log", []).append(what)


@pytest.fixture(autouse=True)
def _clear() -> None:
    seen.clear()


@step
async def long_task() -> None:
    note("long started")
    try:
        await anyio.sleep_forever()
    finally:
        note("long stopped")


@step
async def release_inventory(order: str) -> str:
    note(f"released {order}")
    return f"released {order}"


@workflow
async def with_cleanup(order: str) -> str:
    try:
        await long_task()
    except asyncio.CancelledError:
        await release_inventory(order)  # cleanup runs as ordinary steps
        raise
    return "finished"


@workflow
async def slow_cleanup() -> None:
    try:
        await long_task()
    except asyncio.CancelledError:
        await asyncio.sleep(3600)  # longer than any grace period


async def wait_for_note(what: str) -> None:
    with anyio.fail_after(10):
        while what not in seen.get("log", []):
            await anyio.sleep(0.01)


@pytest.mark.parametrize("cache_size", [10_000, 0])
async def test_the_body_may_clean_up_once(world: World, cache_size: int) -> None:
    async with Worker(world, [with_cleanup], lease_seconds=0.3, cache_size=cache_size):
        run = await start(with_cleanup, "o-5", world=world)
        await wait_for_note("long started")
        await run.cancel("customer left", grace=30)
        with pytest.raises(RunCancelledError) as info:
            await run.result(timeout=10)
        await wait_for_note("long stopped")  # the in-flight step was told to stop
    assert info.value.reason == "customer left"
    assert seen["log"].count("released o-5") == 1
    events = await run.events()
    requested = next(i for i, e in enumerate(events) if isinstance(e, RunCancelRequested))
    cleanup = [
        i
        for i, e in enumerate(events)
        if isinstance(e, StepCreated) and e.name == "release_inventory"
    ]
    assert cleanup and cleanup[0] > requested
    assert any(isinstance(e, StepDiscarded) and e.step == 1 for e in events)
    assert not any(isinstance(e, StepCompleted) and e.step == 1 for e in events)
    assert await run.status() is RunStatus.CANCELLED


async def test_the_grace_period_bounds_cleanup(world: World) -> None:
    async with Worker(world, [slow_cleanup], lease_seconds=0.3):
        run = await start(slow_cleanup, world=world)
        await wait_for_note("long started")
        await run.cancel("stop", grace=1.0)
        assert await run.status() is RunStatus.CANCELLING
        with pytest.raises(RunCancelledError, match="grace period"):
            await run.result(timeout=10)


async def test_cancelling_a_pending_run_needs_no_worker(world: World) -> None:
    run = await start(with_cleanup, "o-6", world=world)
    await run.cancel("never mind")
    assert await run.status() is RunStatus.CANCELLED
    with pytest.raises(RunCancelledError, match="never mind"):
        await run.result(timeout=1)


@workflow
async def naps_forever() -> None:
    await asyncio.sleep(3600)


async def test_a_run_timeout_fails_the_run(world: World) -> None:
    async with Worker(world, [naps_forever]):
        run = await start(naps_forever, timeout=0.3, world=world)
        with pytest.raises(RunFailedError) as info:
            await run.result(timeout=10)
    assert info.value.error_type == "TimeoutError"
    with pytest.raises(ValueError):
        await start(naps_forever, timeout=0, world=world)


@step(timeout=0.1, max_retries=1, retry_delay=0)
async def too_slow() -> None:
    note(f"attempt {get_step_metadata().attempt}")
    await anyio.sleep(5)


@step(timeout=0.1, max_retries=0)
def too_slow_in_a_thread() -> None:
    import time

    time.sleep(0.5)


@workflow
async def times_out(threaded: bool) -> str:
    try:
        await (too_slow_in_a_thread() if threaded else too_slow())
    except StepFailedError as exc:
        return exc.error_type
    return "finished"


async def test_a_step_timeout_fails_the_attempt(world: World) -> None:
    async with Worker(world, [times_out]):
        assert await (await start(times_out, False, world=world)).result(timeout=10) == (
            "TimeoutError"
        )
        assert await (await start(times_out, True, world=world)).result(timeout=10) == (
            "TimeoutError"
        )
    assert seen["log"] == ["attempt 1", "attempt 2"]
