"""A deterministic asyncio event loop for workflow bodies.

The loop has no I/O and no clock of its own. Callbacks run in FIFO order when
the engine calls ``run_until_quiescent``; time is whatever the engine says it
is (the time of the event being replayed); ``call_at``/``call_later`` become
durable timers through a callback to the engine. So ``asyncio.gather``,
``create_task``, ``wait``, ``wait_for`` and ``asyncio.sleep`` all work inside a
workflow and replay identically. Anything non-deterministic (sockets, threads,
subprocesses, executors) is refused with an error that names the alternative.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from asyncio import events
from collections.abc import Callable, Coroutine, Generator
from datetime import UTC, datetime
from typing import Any, TypeVar, TypeVarTuple, Unpack

__all__ = ["LATEST_TIMER", "WorkflowLoop"]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

LATEST_TIMER = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
"""The latest moment of the workflow clock a durable timer or a child's deadline is
recorded for: later ones (``sleep(1e12)``, ``wait_for(x, timeout=inf)``) are
clamped to it. They never fire in practice, and every world can store the time."""


class WorkflowLoop(asyncio.AbstractEventLoop):
    """The event loop one workflow instance runs on."""

    def __init__(
        self,
        on_timer: Callable[[asyncio.TimerHandle], None],
        on_error: Callable[[dict[str, Any]], None],
    ) -> None:
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._now = 0.0
        self._on_timer = on_timer
        self._on_error = on_error
        self._closed = False
        self._running = False

    # ------------------------------------------------------------ engine side

    def set_time(self, timestamp: float) -> None:
        """Set the workflow clock (seconds since the epoch); it never goes back."""
        self._now = max(self._now, timestamp)

    def run_until_quiescent(self) -> None:
        """Run ready callbacks, and those they schedule, until none is left."""
        previous = events._get_running_loop()
        events._set_running_loop(self)
        self._running = True
        try:
            while self._ready:
                handle = self._ready.popleft()
                if not handle._cancelled:
                    handle._run()
        finally:
            self._running = False
            events._set_running_loop(previous)

    def fire(self, handle: asyncio.TimerHandle) -> None:
        """Schedule a durable timer's callback (its wait completed)."""
        if not handle.cancelled():
            self._ready.append(handle)

    # ------------------------------------------------------------ asyncio side

    def time(self) -> float:
        return self._now

    def call_soon(
        self,
        callback: Callable[[Unpack[Ts]], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(
        self,
        delay: float,
        callback: Callable[[Unpack[Ts]], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        return self.call_at(self._now + delay, callback, *args, context=context)

    def call_at(
        self,
        when: float,
        callback: Callable[[Unpack[Ts]], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if when != when:  # NaN: no point in time, and asyncio would order it anywhere
            raise ValueError("a timer's delay must be a number of seconds, got NaN")
        handle = asyncio.TimerHandle(when, callback, args, self, context)
        self._on_timer(handle)
        return handle

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        """A cancelled durable timer stays recorded; its firing is ignored."""

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(
        self,
        coro: Coroutine[Any, Any, T] | Generator[Any, None, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        self._on_error(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self._on_error(context)

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._ready.clear()

    def get_exception_handler(self) -> None:
        return None

    def _refuse(self, what: str) -> Any:
        raise RuntimeError(
            f"{what} is not allowed in workflow code: it is not deterministic. "
            "Do it in a @step, and use workflow.sleep/now/random for time and chance."
        )

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        return self._refuse("run_in_executor")  # type: ignore[no-any-return]

    def call_soon_threadsafe(
        self,
        callback: Callable[[Unpack[Ts]], object],
        *args: *Ts,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        return self._refuse("call_soon_threadsafe")  # type: ignore[no-any-return]

    def run_forever(self) -> None:
        self._refuse("run_forever")

    def run_until_complete(self, future: Any) -> Any:
        return self._refuse("run_until_complete")

    def stop(self) -> None:
        self._refuse("stop")

    async def getaddrinfo(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("network I/O")

    async def create_connection(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("network I/O")

    async def create_server(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("network I/O")

    async def subprocess_exec(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("starting a subprocess")

    async def subprocess_shell(self, *args: Any, **kwargs: Any) -> Any:
        return self._refuse("starting a subprocess")

    async def shutdown_asyncgens(self) -> None:
        return None

    async def shutdown_default_executor(self, *args: Any, **kwargs: Any) -> None:
        return None
