"""Wake-ups for ``World.wait``: one hub per storage, shared by its world objects.

A signal wakes every waiter on its topic; a signal nobody waits for is
remembered (boundedly), so the next ``wait`` on the topic returns at once and
no wake-up is lost between a caller's check and its wait. Waiters may belong
to different event loops (threads); each is woken on its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable

import anyio
import anyio.lowlevel

from worlds.protocol import RUNS_TOPIC, is_run_topic

__all__ = ["SignalHub"]

_UNHEARD_LIMIT = 4096
"""Remembered signals at most; past it the oldest is forgotten, which costs the
next wait on its topic one poll interval, nothing more."""

_Waiter = tuple[asyncio.AbstractEventLoop, anyio.Event]


class SignalHub:
    """Topic wake-ups for the world objects of one storage in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[str, set[_Waiter]] = {}
        self._unheard: dict[str, None] = {}

    def signal(self, topic: str) -> None:
        """Wake everyone waiting on ``topic``, or remember it for the next waiter.

        A run's topic signals ``RUNS_TOPIC`` too: here, where every signal of a
        world passes (from this process or, PostgreSQL, from a notification),
        rather than at each place a run's topic is raised."""
        woken: set[_Waiter] = set()
        with self._lock:
            for each in (topic, RUNS_TOPIC) if is_run_topic(topic) else (topic,):
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
        """Wake every waiter (the world is closing)."""
        with self._lock:
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
        waiter = (asyncio.get_running_loop(), anyio.Event())
        with self._lock:
            self._waiters.setdefault(topic, set()).add(waiter)
        try:
            with anyio.move_on_after(timeout):
                await waiter[1].wait()
        finally:
            with self._lock:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._waiters[topic]


def _wake(waiters: Iterable[_Waiter]) -> None:
    try:
        current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    for loop, event in waiters:
        if loop is current:
            event.set()
        else:
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(event.set)
