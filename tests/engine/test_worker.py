"""Worker behaviour: bounded concurrency, registration, graceful shutdown, lease takeover."""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from workflow import RunStatus, Worker, get_step_metadata, start, step, workflow
from worlds.protocol import World
from worlds.types import StepDiscarded, StepStarted

pytestmark = pytest.mark.anyio

in_flight = {"now": 0, "peak": 0}


@step
async def occupy(i: int) -> int:
    in_flight["now"] += 1
    in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
    await anyio.sleep(0.02)
    in_flight["now"] -= 1
    return i


@workflow
async def fan(n: int) -> int:
    return sum(await asyncio.gather(*(occupy(i) for i in range(n))))


async def test_concurrency_is_bounded(world: World) -> None:
    in_flight.update(now=0, peak=0)
    async with Worker(world, [fan], concurrency=3):
        run = await start(fan, 12, world=world)
        assert await run.result(timeout=20) == sum(range(12))
    assert 1 <= in_flight["peak"] <= 3


async def test_concurrency_is_bounded_when_runs_start_beside_the_worker(world: World) -> None:
    """Runs started in the worker's process take their first task (and steps)
    straight to the worker, and many starting at once still respect its bound."""
    in_flight.update(now=0, peak=0)
    async with Worker(world, [fan], concurrency=3):
        runs: list[Any] = []

        async def begin(n: int) -> None:
            runs.append((n, await start(fan, n, world=world)))

        async with anyio.create_task_group() as group:
            for n in range(1, 9):
                group.start_soon(begin, n)
        for n, run in runs:
            assert await run.result(timeout=30) == sum(range(n))
    assert 1 <= in_flight["peak"] <= 3


async def test_registration_is_checked(world: World) -> None:
    with pytest.raises(TypeError, match="@workflow and @step"):
        Worker(world, [print])
    with pytest.raises(ValueError, match="concurrency"):
        Worker(world, [fan], concurrency=0)

    @workflow(name="fan")
    async def impostor(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="two functions are registered as 'fan'"):
        Worker(world, [fan, impostor])
    module = types.ModuleType("app")
    module.occupy, module.other = occupy, 42  # type: ignore[attr-defined]
    assert Worker(world, [module]).names == {"occupy"}
    # a workflow brings along the steps its module can see
    assert Worker(world, [fan]).names == {"fan", "occupy", "slow_once", "blocked_in_thread"}


attempts: list[int] = []


@step(max_retries=0)
async def slow_once() -> str:
    attempts.append(get_step_metadata().attempt)
    if len(attempts) == 1:
        await anyio.sleep_forever()  # the first worker is shut down while this runs
    return "done"


@workflow
async def survives_shutdown() -> str:
    return await slow_once()


async def until(condition: Callable[[], object]) -> None:
    """Wait (10 s at most) until ``condition()`` is true."""
    with anyio.fail_after(10):
        while not condition():
            await anyio.sleep(0.01)


async def test_shutdown_releases_leases_so_another_worker_continues(world: World) -> None:
    attempts.clear()
    worker = Worker(world, [survives_shutdown], shutdown_grace=0.2, lease_seconds=60)
    async with worker:
        run = await start(survives_shutdown, world=world)
        await until(lambda: attempts)
    # the 60 s lease was released on shutdown, so a new worker takes over at once
    async with Worker(world, [survives_shutdown]):
        assert await run.result(timeout=5) == "done"
    assert attempts == [1, 2]
    started = [e.attempt for e in await run.events() if isinstance(e, StepStarted)]
    assert started == [1, 2]
    assert await run.status() is RunStatus.COMPLETED


gate = threading.Event()
thread_attempts: list[tuple[int, str]] = []


@step
def blocked_in_thread() -> str:
    attempt = get_step_metadata().attempt
    thread_attempts.append((attempt, "start"))
    gate.wait()
    thread_attempts.append((attempt, "end"))
    return "done"


@workflow
async def waits_on_a_thread() -> str:
    return await blocked_in_thread()


async def test_past_the_grace_a_thread_step_is_released(world: World) -> None:
    """A plain-``def`` step honours ``shutdown_grace`` like an ``async`` one: the
    worker stops waiting for its thread, releases its lease and closes while the
    thread still runs (issue 33); it used to wait for the thread to end."""
    gate.clear()
    thread_attempts.clear()
    # only so that the test ends if the worker waits for the thread: the assertion
    # below is on the order of events, not on how long anything took
    unstick = threading.Timer(30, gate.set)
    unstick.start()
    try:
        worker = Worker(world, [waits_on_a_thread], shutdown_grace=0.2, lease_seconds=120)
        async with worker:
            run = await start(waits_on_a_thread, world=world)
            await until(lambda: thread_attempts)
        assert thread_attempts == [(1, "start")]  # closed while the step's thread runs
        released = [e for e in await run.events() if isinstance(e, StepDiscarded)]
        assert [(e.attempt, e.outcome) for e in released] == [(1, "released")]
    finally:
        gate.set()
        unstick.cancel()
    # the 120 s lease was released, so another worker retries the step at once
    async with Worker(world, [waits_on_a_thread]):
        assert await run.result(timeout=10) == "done"
    started = [e.attempt for e in await run.events() if isinstance(e, StepStarted)]
    assert started == [1, 2]


async def test_an_error_raised_in_the_worker_block_leaves_as_itself(world: World) -> None:
    """``except ValueError`` around ``async with Worker(...)`` catches a ValueError raised
    in the block: not an ExceptionGroup from the worker's task group (issue 24)."""
    problem = ValueError("raised in the block")
    caught: BaseException | None = None
    try:
        async with Worker(world, [survives_shutdown], shutdown_grace=0.2):
            raise problem
    except ValueError as exc:
        caught = exc
    assert caught is problem


async def test_an_error_raised_while_the_worker_runs_work_leaves_as_itself(world: World) -> None:
    attempts.clear()
    with pytest.raises(KeyError) as raised:
        async with Worker(world, [survives_shutdown], shutdown_grace=0.2):
            await start(survives_shutdown, world=world)
            await until(lambda: attempts)
            raise KeyError("stop")
    assert raised.type is KeyError
    assert raised.value.__context__ is None  # nothing wrapped it or was wrapped around it


async def test_a_cancelled_worker_block_is_still_only_cancelled(world: World) -> None:
    """A cancel scope around the block still ends it quietly."""
    with anyio.move_on_after(0.2) as scope:
        async with Worker(world, [survives_shutdown], shutdown_grace=0.2):
            await anyio.sleep_forever()
    assert scope.cancelled_caught


class Flaky:
    """A world whose first two leases fail, as if its database were restarting."""

    def __init__(self, inner: World) -> None:
        self.inner = inner
        self.failures = 2

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def lease(self, *args: object, **kwargs: object) -> object:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database restarting")
        return await self.inner.lease(*args, **kwargs)  # type: ignore[arg-type]


async def test_a_worker_survives_world_errors(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = Flaky(world)
    async with Worker(flaky, [fan], poll_interval=0.05):  # type: ignore[arg-type]
        run = await start(fan, 3, world=world)
        assert await run.result(timeout=10) == 3
    assert flaky.failures == 0
    assert "could not lease work" in caplog.text
