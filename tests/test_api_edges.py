"""Issue 10: the in-workflow API at its edges, through the public API on every world."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from workflow import (
    RunCancelledError,
    RunFailedError,
    RunStatus,
    Worker,
    continue_as_new,
    create_hook,
    get_run_metadata,
    sleep,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import RunStarted, StepFailed, StepRetrying, StepStarted

pytestmark = pytest.mark.anyio


@step
async def async_facts() -> list[Any]:
    meta = get_run_metadata()
    return [meta.run_id, meta.workflow, meta.created_at.isoformat()]


@step
def thread_facts() -> list[Any]:
    meta = get_run_metadata()
    return [meta.run_id, meta.workflow, meta.created_at.isoformat()]


@workflow(name="knows-its-run")
async def knows_its_run() -> list[list[Any]]:
    meta = get_run_metadata()
    own = [meta.run_id, meta.workflow, meta.created_at.isoformat()]
    return [own, await async_facts(), await thread_facts()]


async def test_get_run_metadata_works_in_steps(world: World) -> None:
    """Issue 10, item 5: a step (async or plain ``def``) knows its run as the workflow does."""
    async with Worker(world, [knows_its_run]):
        run = await start(knows_its_run, world=world)
        own, in_async_step, in_thread_step = await run.result(timeout=10)
    record = await world.get_run(run.id)
    assert record is not None
    expected = [run.id, "knows-its-run", record.created_at.isoformat()]
    assert own == in_async_step == in_thread_step == expected


@step(max_retries=5, retry_delay=30)
async def sleeps_in_a_step() -> None:
    await sleep(1)


@step(max_retries=5, retry_delay=30)
async def hooks_in_a_step() -> None:
    create_hook("not-here")


@step(max_retries=5, retry_delay=30)
def continues_in_a_step() -> None:
    continue_as_new()


@workflow
async def misuses(which: str) -> None:
    misused = {"sleep": sleeps_in_a_step, "hook": hooks_in_a_step, "continue": continues_in_a_step}
    await misused[which]()


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("sleep", "use asyncio.sleep in a step"),
        ("hook", "create_hook"),
        ("continue", "continue_as_new"),
    ],
)
async def test_api_misuse_in_a_step_fails_at_once(world: World, which: str, message: str) -> None:
    """Issue 10, item 5: misuse is never retried with backoff; attempt 1 fails the step."""
    async with Worker(world, [misuses]):
        run = await start(misuses, which, world=world)
        with pytest.raises(RunFailedError, match=message) as info:
            await run.result(timeout=10)  # a retry would wait 30 s
    assert "NotInWorkflowError" in str(info.value)
    events = await run.events()
    assert not any(isinstance(e, StepRetrying) for e in events)
    assert [e.attempt for e in events if isinstance(e, StepStarted)] == [1]
    (failed,) = [e for e in events if isinstance(e, StepFailed)]
    assert (failed.attempt, failed.error.type) == (1, "NotInWorkflowError")


@step(timeout=0.2, max_retries=0)
async def slow_step() -> None:
    await asyncio.sleep(30)


@step(timeout=0.2, max_retries=0)
def slow_in_a_thread() -> None:
    import time

    time.sleep(1)


@workflow
async def times_out(threaded: bool) -> None:
    await (slow_in_a_thread() if threaded else slow_step())


@pytest.mark.parametrize("threaded", [False, True])
async def test_a_step_timeout_names_the_step_and_the_limit(world: World, threaded: bool) -> None:
    """Issue 10, papercut: the ``TimeoutError`` of a step says which step and what limit."""
    async with Worker(world, [times_out]):
        run = await start(times_out, threaded, world=world)
        with pytest.raises(RunFailedError):
            await run.result(timeout=10)
    (failed,) = [e for e in await run.events() if isinstance(e, StepFailed)]
    name = "slow_in_a_thread" if threaded else "slow_step"
    assert failed.error.type == "TimeoutError"
    assert f"step {name!r}" in failed.error.message
    assert "0.2 s" in failed.error.message


started: list[str] = []


@step
async def waits_forever() -> None:
    started.append("waiting")
    await anyio.sleep_forever()


@workflow
async def swallows_cancellation(label: str) -> str:
    started.append(label)
    try:
        await waits_forever()
    except asyncio.CancelledError:
        return "cleaned up and returned"
    return "finished"


@workflow
async def quick(label: str) -> str:
    return label


async def test_a_body_that_catches_cancellation_and_returns_still_ends_cancelled(
    world: World,
) -> None:
    """Deliberately unlike Temporal: a requested cancellation always ends ``cancelled``."""
    started.clear()
    async with Worker(world, [swallows_cancellation], lease_seconds=0.5):
        run = await start(swallows_cancellation, "catcher", world=world)
        with anyio.fail_after(10):
            while "waiting" not in started:
                await anyio.sleep(0.01)
        await run.cancel("stop", grace=30)
        with pytest.raises(RunCancelledError, match="stop"):
            await run.result(timeout=10)
    assert await run.status() is RunStatus.CANCELLED


async def test_a_run_cancelled_before_its_first_task_never_runs_its_body(world: World) -> None:
    """Deliberately unlike Temporal: there is no body to tell, so nothing of it runs."""
    started.clear()
    run = await start(swallows_cancellation, "never", world=world)
    await run.cancel("changed my mind", grace=30)
    async with Worker(world, [swallows_cancellation, quick]):
        later = await start(quick, "later", world=world)
        assert await later.result(timeout=10) == "later"  # the worker has drained its queue
    assert await run.status() is RunStatus.CANCELLED
    assert "never" not in started
    assert not any(isinstance(e, RunStarted) for e in await run.events())
