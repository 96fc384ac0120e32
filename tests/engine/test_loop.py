"""The deterministic event loop workflow bodies run on, driven directly.

Issue 12, item 6: callbacks run in FIFO order when the engine asks, time is
only what the engine sets, timers go to the engine and run only when it fires
them, and nothing non-deterministic is let in.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from workflow.engine._loop import WorkflowLoop


class Engine:
    """What the instance does for the loop: keep its timers and its errors."""

    def __init__(self) -> None:
        self.timers: list[asyncio.TimerHandle] = []
        self.errors: list[dict[str, Any]] = []
        self.loop = WorkflowLoop(self.timers.append, self.errors.append)  # type: ignore[abstract]


@pytest.fixture
def engine() -> Engine:
    return Engine()


def test_callbacks_run_in_call_soon_order_only_when_asked(engine: Engine) -> None:
    loop = engine.loop
    order: list[object] = []
    loop.call_soon(order.append, 1)

    def second() -> None:
        order.append(2)
        loop.call_soon(order.append, 4)

    loop.call_soon(second)
    loop.call_soon(order.append, 3)
    assert order == []
    loop.run_until_quiescent()
    assert order == [1, 2, 3, 4]


def test_a_cancelled_callback_does_not_run(engine: Engine) -> None:
    loop = engine.loop
    order: list[object] = []
    loop.call_soon(order.append, 1).cancel()
    loop.call_soon(order.append, 2)
    loop.run_until_quiescent()
    assert order == [2]


def test_time_is_what_the_engine_sets_and_never_goes_back(engine: Engine) -> None:
    loop = engine.loop
    assert loop.time() == 0.0
    time.sleep(0.01)  # real time passing is not seen
    assert loop.time() == 0.0
    loop.set_time(1000.0)
    loop.set_time(500.0)
    assert loop.time() == 1000.0


def test_call_later_goes_to_the_engine_by_virtual_time(engine: Engine) -> None:
    loop = engine.loop
    order: list[object] = []
    loop.set_time(100.0)
    late = loop.call_later(30, order.append, "late")
    soon = loop.call_later(10, order.append, "soon")
    at = loop.call_at(150.0, order.append, "at")
    assert [h.when() for h in engine.timers] == [130.0, 110.0, 150.0]
    loop.run_until_quiescent()
    assert order == []  # a timer runs only when the engine fires it
    for handle in (soon, late, at):
        loop.fire(handle)
    loop.run_until_quiescent()
    assert order == ["soon", "late", "at"]


def test_a_cancelled_timer_that_fires_does_not_run(engine: Engine) -> None:
    loop = engine.loop
    order: list[object] = []
    handle = loop.call_later(5, order.append, "x")
    handle.cancel()
    loop.fire(handle)
    loop.run_until_quiescent()
    assert order == []
    assert engine.timers == [handle]  # recorded all the same: a durable timer stays


def test_a_nan_delay_is_refused(engine: Engine) -> None:
    with pytest.raises(ValueError, match="NaN"):
        engine.loop.call_later(float("nan"), print)
    assert engine.timers == []


def test_asyncio_sleep_and_gather_run_on_the_loop(engine: Engine) -> None:
    loop = engine.loop
    seen: list[str] = []

    async def worker(name: str, delay: float) -> str:
        await asyncio.sleep(delay)
        seen.append(f"{name}@{asyncio.get_running_loop().time()}")
        return name

    async def body() -> list[str]:
        return list(await asyncio.gather(worker("a", 20), worker("b", 10)))

    task = loop.create_task(body())
    loop.run_until_quiescent()
    assert [h.when() for h in engine.timers] == [20.0, 10.0]
    assert not task.done()
    loop.set_time(10.0)
    loop.fire(engine.timers[1])
    loop.run_until_quiescent()
    loop.set_time(20.0)
    loop.fire(engine.timers[0])
    loop.run_until_quiescent()
    assert seen == ["b@10.0", "a@20.0"]
    assert task.result() == ["a", "b"]


def test_the_running_loop_is_set_only_while_callbacks_run(engine: Engine) -> None:
    loop = engine.loop
    inside: list[object] = []
    loop.call_soon(lambda: inside.append((asyncio.get_running_loop(), loop.is_running())))
    loop.run_until_quiescent()
    assert inside == [(loop, True)]
    assert not loop.is_running()
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_an_error_in_a_callback_goes_to_the_engine(engine: Engine) -> None:
    def broken() -> None:
        raise KeyError("boom")

    engine.loop.call_soon(broken)
    engine.loop.run_until_quiescent()
    (context,) = engine.errors
    assert isinstance(context["exception"], KeyError)


@pytest.mark.parametrize(
    "attempt",
    [
        lambda loop: loop.run_in_executor(None, print),
        lambda loop: loop.call_soon_threadsafe(print),
        lambda loop: loop.run_forever(),
        lambda loop: loop.stop(),
    ],
)
def test_non_deterministic_calls_are_refused_naming_steps(engine: Engine, attempt: Any) -> None:
    with pytest.raises(RuntimeError, match=r"not allowed in workflow code.*@step"):
        attempt(engine.loop)


def test_network_io_in_a_task_is_refused(engine: Engine) -> None:
    async def body() -> None:
        await asyncio.open_connection("example.com", 80)

    task = engine.loop.create_task(body())
    engine.loop.run_until_quiescent()
    with pytest.raises(RuntimeError, match="network I/O is not allowed"):
        task.result()


def test_close_drops_what_was_ready(engine: Engine) -> None:
    loop = engine.loop
    order: list[object] = []
    loop.call_soon(order.append, 1)
    loop.close()
    loop.run_until_quiescent()
    assert order == []
    assert loop.is_closed()
