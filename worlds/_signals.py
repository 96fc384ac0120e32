"""Wake-ups for ``World.wait``: one hub per storage, shared by its world objects.

A signal wakes every waiter on its topic; a signal nobody waits for is
remembered (boundedly), so the next ``wait`` on the topic returns at once and
no wake-up is lost between a caller's check and its wait. A run's topic wakes
``RUNS_TOPIC`` waiters too, and a name's ``work_topic`` wakes the
``WORK_TOPIC`` waiters, whose change token (``heard``) it moves only for polls
of that name. Waiters may belong to different event loops (threads); each is
woken on its own loop. A loop is asyncio's or trio's (anyio runs on both, and
so does the memory world the test kit uses): each gives a thread-safe way to
schedule the wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import threading
from collections.abc import Callable, Collection, Iterable
from typing import Protocol

import anyio
import anyio.lowlevel

from worlds.protocol import RUNS_TOPIC, WORK_TOPIC, is_run_topic, is_work_topic, work_topic

__all__ = ["SignalHub"]

_UNHEARD_LIMIT = 4096
"""Remembered signals at most; past it the oldest is forgotten, which costs the
next wait on its topic one poll interval, nothing more."""


class _Wake(Protocol):
    def set(self) -> None: ...


_Waiter = tuple[object, Callable[[Callable[[], None]], object], _Wake]
"""The waiter's loop (its identity), how to run a callback on it from any thread, its event."""


class _FutureWake:
    """An asyncio waiter's wake-up: its future, resolved once (a timer or a signal)."""

    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future

    def set(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


class SignalHub:
    """Topic wake-ups for the world objects of one storage in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}
        self._unheard: dict[str, None] = {}
        self._heard: dict[str, int] = {}
        self._epoch = 0

    def heard(self, topic: str, names: Collection[str] = ()) -> tuple[int, ...]:
        """A count that changes whenever ``topic`` is signalled or everyone is woken:
        a poll that found nothing need not look again while it stays the same.

        For ``WORK_TOPIC`` it changes too with the ``work_topic`` of each of
        ``names`` (the names the poll asks for), and with no other name's."""
        with self._lock:
            counts = (self._epoch, self._heard.get(topic, 0))
            if topic != WORK_TOPIC or not names:
                return counts
            named = tuple(self._heard.get(work_topic(name), 0) for name in sorted(names))
            return counts + named

    def signal(self, topic: str) -> None:
        """Wake everyone waiting on ``topic``, or remember it for the next waiter.

        A run's topic wakes ``RUNS_TOPIC`` too, and a name's work topic wakes
        ``WORK_TOPIC`` while it is counted under its own name only: here, where
        every signal of a world passes (from this process or, PostgreSQL, from
        a notification), rather than at each place such a topic is raised. Run
        topics are not counted: no poll is remembered by one, and a count per
        run would grow with every run the process saw."""
        woken: set[_Waiter] = set()
        if is_run_topic(topic):
            wakes: tuple[str, ...] = (topic, RUNS_TOPIC)
        elif is_work_topic(topic):
            wakes = (WORK_TOPIC,)
        else:
            wakes = (topic,)
        with self._lock:
            if not is_run_topic(topic):
                self._heard[topic] = self._heard.get(topic, 0) + 1
            for each in wakes:
                waiters = self._waiters.pop(each, None)
                if waiters:
                    woken |= waiters
                    continue
                self._unheard.pop(each, None)  # newest last: the oldest is forgotten first
                self._unheard[each] = None
                if len(self._unheard) > _UNHEARD_LIMIT:
                    del self._unheard[next(iter(self._unheard))]
        _wake(woken)

    def wake_all(self) -> None:
        """Wake every waiter (the world is closing, or its listener was down)."""
        with self._lock:
            self._epoch += 1
            waiters = {waiter for group in self._waiters.values() for waiter in group}
            self._waiters.clear()
        _wake(waiters)

    async def wait(self, topic: str, timeout: float) -> None:
        """Return on a signal of ``topic`` (or a remembered one), or after ``timeout``."""
        with self._lock:
            remembered = self._unheard.pop(topic, 0) is None
        if remembered:
            await anyio.lowlevel.checkpoint()
            return
        loop = _running_loop()
        if loop is None:
            raise RuntimeError("SignalHub.wait needs a running asyncio or trio event loop")
        running, call_soon = loop
        if isinstance(running, asyncio.AbstractEventLoop):
            # on asyncio a future and a timer do what an anyio event under a
            # ``move_on_after`` scope does, for a fifth of the calls (a wait per result)
            future = running.create_future()
            wake = _FutureWake(future)
            waiter: _Waiter = (running, call_soon, wake)
            with self._lock:
                self._waiters.setdefault(topic, set()).add(waiter)
            timer = running.call_later(timeout, wake.set) if math.isfinite(timeout) else None
            try:
                await future
            finally:
                if timer is not None:
                    timer.cancel()
                self._forget(topic, waiter)
            return
        event = anyio.Event()
        waiter = (running, call_soon, event)
        with self._lock:
            self._waiters.setdefault(topic, set()).add(waiter)
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            self._forget(topic, waiter)

    def _forget(self, topic: str, waiter: _Waiter) -> None:
        with self._lock:
            waiters = self._waiters.get(topic)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[topic]


def _running_loop() -> tuple[object, Callable[[Callable[[], None]], object]] | None:
    """This thread's running loop and its thread-safe ``call soon``, or None outside one."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return loop, loop.call_soon_threadsafe
    trio = sys.modules.get("trio")  # only a program that imported trio can be running it
    if trio is not None:
        try:
            token = trio.lowlevel.current_trio_token()
        except RuntimeError:
            return None
        return token, token.run_sync_soon
    return None


def _wake(waiters: Iterable[_Waiter]) -> None:
    running = _running_loop()
    current = None if running is None else running[0]
    for loop, call_soon, event in waiters:
        if loop is current:
            event.set()
        else:
            # that loop has closed (trio's RunFinishedError is a RuntimeError too)
            with contextlib.suppress(RuntimeError):
                call_soon(event.set)
