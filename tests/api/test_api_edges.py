"""Issue 10: the in-workflow API at its edges, through the public API on every world."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import anyio
import pytest

from workflow import (
    NonDeterminismError,
    RunCancelledError,
    RunFailedError,
    RunStatus,
    Unique,
    Worker,
    continue_as_new,
    create_hook,
    encode_history,
    find_run,
    get_run_metadata,
    replay,
    set_attribute,
    sleep,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import RunStarted, StepFailed, StepRetrying, StepStarted, WaitCreated

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


@step
async def plus_one(x: int) -> int:
    return x + 1


@workflow(name="counts")
async def counts(n: int) -> int:
    for _ in range(n):
        n = await plus_one(n)
    return n


@workflow(name="counts")
async def counts_differently(n: int) -> int:
    await asyncio.sleep(1)
    return n


async def test_replay_accepts_what_encode_history_returns(world: World) -> None:
    """Issue 10, papercut: the README's ``replay(fn, encode_history(events), run_id=...)``."""
    async with Worker(world, [counts]):
        run = await start(counts, 2, world=world)
        assert await run.result(timeout=10) == 4
    recorded = encode_history(await run.events())
    await replay(counts, recorded, run_id=run.id)
    await replay(counts, recorded.decode(), run_id=run.id)
    await replay(counts, await run.events(), run_id=run.id)
    with pytest.raises(NonDeterminismError):
        await replay(counts_differently, recorded, run_id=run.id)
    with pytest.raises(ValueError, match="encode_history"):
        await replay(counts, b"not json", run_id=run.id)
    with pytest.raises(TypeError, match="encode_history"):
        await replay(counts, {"events": []}, run_id=run.id)  # type: ignore[arg-type]


@workflow
async def sleeps_far(how: str) -> Any:
    if how == "wait_for":
        return await asyncio.wait_for(plus_one(1), timeout=1e12)
    if how == "nan":
        try:
            await sleep(math.nan)
        except ValueError as exc:
            return str(exc)
    durations: dict[str, Any] = {"1e12": 1e12, "inf": math.inf, "timedelta.max": timedelta.max}
    try:
        await asyncio.wait_for(sleep(durations[how]), timeout=0.2)
    except TimeoutError:
        return "still asleep"
    return "woke up"


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("wait_for", 2),
        ("1e12", "still asleep"),
        ("inf", "still asleep"),
        ("timedelta.max", "still asleep"),
        ("nan", "sleep() needs a number of seconds, got NaN"),
    ],
)
async def test_a_timer_too_far_away_is_clamped(world: World, how: str, expected: Any) -> None:
    """Issue 10, papercut: ``sleep(1e12)`` and ``wait_for(x, timeout=1e12)`` do not fail
    the run ("year 33715 is out of range"); the timer is clamped to 9000-01-01."""
    async with Worker(world, [sleeps_far]):
        run = await start(sleeps_far, how, world=world)
        assert await run.result(timeout=10) == expected
    waits = [e for e in await run.events() if isinstance(e, WaitCreated)]
    if how != "nan":
        assert max(wait.until.year for wait in waits) == 9000


async def test_sleep_refuses_what_is_not_a_duration() -> None:
    with pytest.raises(TypeError, match="timedelta"):
        await sleep("5")  # type: ignore[arg-type]


@step
async def charges(charge: str) -> None:
    await set_attribute("charge", charge, unique=True)


@workflow
async def charges_twice(order: str) -> None:
    await set_attribute("invoice", f"i-{order}", unique=True)
    await charges(f"ch-{order}-1")
    await charges(f"ch-{order}-2")


async def test_run_claims_include_step_claims_marked_as_such(world: World) -> None:
    """Issue 10, papercut: every pair ``find_run`` resolves to a run is in ``run.claims()``."""
    async with Worker(world, [charges_twice]):
        run = await start(charges_twice, "o-1", attributes={"order": Unique("o-1")}, world=world)
        await run.result(timeout=10)
    claims = await run.claims()
    assert [(c.key, c.value, c.step) for c in claims] == [
        ("charge", "ch-o-1-1", 1),
        ("charge", "ch-o-1-2", 2),
        ("invoice", "i-o-1", None),
        ("order", "o-1", None),
    ]
    for claim in claims:
        assert await find_run(claim.key, claim.value, world=world) == run
    order = await run.claim("order")
    assert order is not None and (order.generation, order.step) == (1, None)
    assert await run.claim("charge") is None  # held by its steps, not by the run


@pytest.mark.parametrize("timeout", [1e12, math.inf, timedelta.max])
async def test_a_run_timeout_too_far_away_is_clamped(world: World, timeout: Any) -> None:
    """Like timers: ``start(..., timeout=1e12)`` is "no deadline in practice", not an error."""
    async with Worker(world, [quick]):
        run = await start(quick, "far", timeout=timeout, world=world)
        assert await run.result(timeout=10) == "far"
