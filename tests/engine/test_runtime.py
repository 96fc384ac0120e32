"""The durable runtime through the public API, on every built-in world."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from workflow import (
    FatalError,
    RetryableError,
    RunCancelledError,
    RunFailedError,
    RunStatus,
    StepFailedError,
    Worker,
    get_step_metadata,
    list_runs,
    now,
    random,
    start,
    step,
    uuid4,
    workflow,
)
from worlds.protocol import World
from worlds.types import (
    RunCompleted,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
)

pytestmark = pytest.mark.anyio

calls: dict[str, list[Any]] = {}


def record(name: str, value: Any = None) -> None:
    calls.setdefault(name, []).append(value)


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    calls.clear()
    flaky_failures.clear()


@step
async def add(x: int, y: int = 1) -> int:
    record("add", x)
    return x + y


@step
def double(x: int) -> int:
    record("double", threading.current_thread() is threading.main_thread())
    return x * 2


@workflow
async def sequential(n: int) -> int:
    total = 0
    for i in range(n):
        total = await add(total, y=i)
    return total


@workflow
async def fan_out(xs: list[int]) -> list[int]:
    doubled = await asyncio.gather(*(double(x) for x in xs))
    task: asyncio.Task[int] = asyncio.create_task(add(sum(doubled)))  # type: ignore[arg-type]
    return [*doubled, await task]


async def test_sequential_steps_record_a_dense_log(world: World) -> None:
    async with Worker(world, [sequential]):
        run = await start(sequential, 4, world=world)
        assert await run.result(timeout=10) == 0 + 1 + 2 + 3
    assert await run.status() is RunStatus.COMPLETED
    events = await run.events()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.step for e in events if isinstance(e, StepCompleted)] == [1, 2, 3, 4]
    assert sum(isinstance(e, StepStarted) for e in events) == 4
    assert isinstance(events[-1], RunCompleted)
    assert calls["add"] == [0, 0, 1, 3]


async def test_parallel_steps_and_tasks(world: World) -> None:
    async with Worker(world, [fan_out, add, double]):
        run = await start(fan_out, [1, 2, 3], world=world)
        assert await run.result(timeout=10) == [2, 4, 6, 13]
    assert calls["double"] == [False, False, False]  # plain def steps run in a thread


flaky_failures: dict[str, int] = {}


@step(max_retries=3, retry_delay=0.0)
async def flaky(key: str, failures: int) -> int:
    attempt = get_step_metadata().attempt
    record("flaky", attempt)
    if flaky_failures.setdefault(key, 0) < failures:
        flaky_failures[key] += 1
        raise ConnectionError(f"attempt {attempt} failed")
    return attempt


@step(max_retries=5, retry_delay=0.0)
async def fatal() -> None:
    record("fatal")
    raise FatalError("card declined")


@step(max_retries=1, retry_delay=30.0)
async def asks_for_quick_retry() -> int:
    attempt = get_step_metadata().attempt
    if attempt == 1:
        raise RetryableError("rate limited", retry_after=0.05)
    return attempt


@workflow
async def retrying(key: str, failures: int) -> int:
    return await flaky(key, failures)


@workflow
async def fails_fatally() -> str:
    try:
        await fatal()
    except StepFailedError as exc:
        return f"{exc.error_type}: {exc.error_message}"
    return "unreachable"


@workflow
async def quick_retry() -> int:
    return await asks_for_quick_retry()


async def test_retries_count_attempts_from_one(world: World) -> None:
    async with Worker(world, [retrying, quick_retry]):
        run = await start(retrying, "a", 2, world=world)
        assert await run.result(timeout=10) == 3
        quick = await start(quick_retry, world=world)
        assert await quick.result(timeout=5) == 2  # retry_after beat the 30 s backoff
    assert calls["flaky"] == [1, 2, 3]
    retries = [e for e in await run.events() if isinstance(e, StepRetrying)]
    assert [(e.attempt, e.error.type) for e in retries] == [
        (1, "ConnectionError"),
        (2, "ConnectionError"),
    ]


async def test_exhausted_retries_fail_the_run(world: World) -> None:
    async with Worker(world, [retrying]):
        run = await start(retrying, "b", 10, world=world)
        with pytest.raises(RunFailedError) as info:
            await run.result(timeout=10)
    assert info.value.error_type == "StepFailedError"
    assert "ConnectionError" in info.value.error_message
    assert calls["flaky"] == [1, 2, 3, 4]  # max_retries=3: four attempts


async def test_fatal_error_is_not_retried(world: World) -> None:
    async with Worker(world, [fails_fatally]):
        run = await start(fails_fatally, world=world)
        assert await run.result(timeout=10) == "FatalError: card declined"
    assert calls["fatal"] == [None]


@workflow
async def replay_safe() -> list[Any]:
    first = [now().isoformat(), random(), str(uuid4())]
    await add(1)
    second = [now().isoformat(), random(), str(uuid4())]
    return [first, second]


async def test_replay_safe_values_survive_replay(world: World) -> None:
    # cache_size=0: every workflow task replays from the log
    async with Worker(world, [replay_safe], cache_size=0):
        replayed = await (await start(replay_safe, world=world)).result(timeout=10)
    async with Worker(world, [replay_safe]):
        run = await start(replay_safe, world=world)
        sticky = await run.result(timeout=10)
    assert replayed[0] != replayed[1]
    assert len(sticky) == 2
    created = (await run.events())[0].at
    assert sticky[0][0] == created.isoformat()


async def test_sticky_and_replaying_workers_agree(world: World) -> None:
    async with Worker(world, [fan_out, sequential], cache_size=0):
        a = await start(fan_out, [5, 6], world=world)
        b = await start(sequential, 6, world=world)
        replayed = (await a.result(timeout=10), await b.result(timeout=10))
    async with Worker(world, [fan_out, sequential]):
        c = await start(fan_out, [5, 6], world=world)
        d = await start(sequential, 6, world=world)
        assert (await c.result(timeout=10), await d.result(timeout=10)) == replayed


blocker_started = anyio.Event()
blocker_stopped: list[str] = []


@step
async def blocks_forever() -> None:
    blocker_started.set()
    try:
        await anyio.sleep_forever()
    finally:
        blocker_stopped.append(get_step_metadata().step_id)


@workflow
async def blocked() -> None:
    await blocks_forever()
    await add(1)


async def test_cancel_stops_an_in_flight_step(world: World) -> None:
    global blocker_started
    blocker_started = anyio.Event()
    blocker_stopped.clear()
    async with Worker(world, [blocked], lease_seconds=0.3):
        run = await start(blocked, world=world)
        with anyio.fail_after(5):
            await blocker_started.wait()
        await run.cancel("customer asked")
        with anyio.fail_after(5):
            while not blocker_stopped:
                await anyio.sleep(0.02)
        with pytest.raises(RunCancelledError) as info:
            await run.result(timeout=5)
        await anyio.sleep(0.2)
    assert info.value.reason == "customer asked"
    assert await run.status() is RunStatus.CANCELLED
    events = await run.events()
    assert any(isinstance(e, StepDiscarded) and e.outcome == "cancelled" for e in events)
    assert sum(isinstance(e, StepCreated) for e in events) == 1  # add() never started
    assert "add" not in calls


@workflow
async def naps(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "rested"


async def test_durable_timer_survives_a_worker_restart(make_world: Callable[[], World]) -> None:
    world = make_world()
    async with world:
        async with Worker(world, [naps]):
            run = await start(naps, 2.0, world=world)
            with anyio.fail_after(30):  # the timer is recorded: the worker may stop
                while not any(isinstance(e, WaitCreated) for e in await run.events()):
                    await anyio.sleep(0.02)
        assert await run.status() is RunStatus.RUNNING
        async with Worker(world, [naps]):
            assert await run.result(timeout=60) == "rested"
        events = await run.events()
        assert any(isinstance(e, WaitCompleted) for e in events)
        assert events[-1].at - events[0].at >= __import__("datetime").timedelta(seconds=2.0)


class Opaque:
    pass


@step
async def returns_opaque() -> Any:
    return Opaque()


@workflow
async def bad_result() -> None:
    await returns_opaque()


async def test_unencodable_arguments_are_refused_before_writing(world: World) -> None:
    with pytest.raises(TypeError, match="Opaque"):
        await start(sequential, Opaque(), world=world)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="@workflow"):
        await start(add, 1, world=world)  # type: ignore[arg-type]
    assert len(await list_runs(world=world)) == 0


async def test_unencodable_step_result_fails_without_retry(world: World) -> None:
    async with Worker(world, [bad_result]):
        run = await start(bad_result, world=world)
        with pytest.raises(RunFailedError, match="Opaque"):
            await run.result(timeout=10)
    assert not any(isinstance(e, StepRetrying) for e in await run.events())


@workflow
async def raises_plain() -> None:
    raise KeyError("missing")


async def test_workflow_exception_fails_the_run(world: World) -> None:
    async with Worker(world, [raises_plain]):
        run = await start(raises_plain, world=world)
        with pytest.raises(RunFailedError) as info:
            await run.result(timeout=10)
    assert info.value.error_type == "KeyError"
    assert await run.status() is RunStatus.FAILED


async def test_result_times_out_without_a_worker(world: World) -> None:
    run = await start(sequential, 1, world=world)
    assert await run.status() is RunStatus.PENDING
    with pytest.raises(TimeoutError):
        await run.result(timeout=0.1)


code_version = {"v": 1}


@step
async def old_step() -> int:
    return 1


@step
async def new_step() -> int:
    return 2


@workflow
async def evolving() -> int:
    first = await (old_step() if code_version["v"] == 1 else new_step())
    await asyncio.sleep(0.3)
    return first


async def test_changed_code_is_detected_on_replay(make_world: Callable[[], World]) -> None:
    code_version["v"] = 1
    world = make_world()
    async with world:
        async with Worker(world, [evolving]):
            run = await start(evolving, world=world)
            with anyio.fail_after(5):
                while not any(isinstance(e, StepCompleted) for e in await run.events()):
                    await anyio.sleep(0.02)
        code_version["v"] = 2  # a deploy changed the workflow while the run slept
        async with Worker(world, [evolving, new_step]):
            with pytest.raises(RunFailedError) as info:
                await run.result(timeout=5)
    assert info.value.error_type == "NonDeterminismError"
    assert "call #0" in info.value.error_message
    assert "step 'old_step'" in info.value.error_message
    assert "step 'new_step'" in info.value.error_message


@workflow
async def swallows_nondeterminism() -> str:
    with contextlib.suppress(Exception):  # user code that swallows everything
        await (old_step() if code_version["v"] == 1 else new_step())
    await asyncio.sleep(0.3)
    return "carried on"


async def test_nondeterminism_cannot_be_swallowed(make_world: Callable[[], World]) -> None:
    code_version["v"] = 1
    world = make_world()
    async with world:
        async with Worker(world, [swallows_nondeterminism]):
            run = await start(swallows_nondeterminism, world=world)
            with anyio.fail_after(5):
                while not any(isinstance(e, StepCompleted) for e in await run.events()):
                    await anyio.sleep(0.02)
        code_version["v"] = 2
        async with Worker(world, [swallows_nondeterminism, new_step]):
            with pytest.raises(RunFailedError, match="NonDeterminismError"):
                await run.result(timeout=5)
