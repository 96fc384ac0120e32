"""Quiet polls: a poll that found nothing is not sent again until something may have changed.

An idle worker asks its world for work and for due schedules every poll
interval. Most of those polls find nothing, and would cost the database a
query each (``rfcs/0018``: an idle worker issues at most one statement a
second). A world remembers, per poll (its kind and names), that it found
nothing, when the earliest thing it saw becomes due, and a change token taken
*before* the query: SQLite the files' size and modification time (every commit
of every process writes them), PostgreSQL the notifications its listener
heard (every write that makes work notifies). While the token is the same,
the due time has not come and the safety interval has not passed, the poll is
answered "nothing" without a query. A token of ``None`` (the world cannot
tell) never answers from memory.

A slow safety poll (``SAFETY_SECONDS``) bounds what a change the token cannot
see costs: a modification time that did not move within one clock tick, a
notification lost with its connection, and a lease taken after the poll (an
item or schedule leased by a worker that then died, which comes due at the
lease's end with no write at all).

``wait_idle`` is ``World.wait_idle`` for a world that keeps a ``Quiet``: it
waits like ``World.wait`` and then on, for as long as the caller's poll would
still be answered from memory, so an idle worker calls its world again only
when something may have changed (a signal, another process's write, a due
time, the safety interval), not every poll interval.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Collection, Hashable
from typing import Any, NamedTuple

import anyio

from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC

__all__ = ["SAFETY_SECONDS", "Quiet", "poll_key", "wait_idle"]

SAFETY_SECONDS = 10.0
"""Longest time a poll is answered from memory: then it queries again, whatever the token."""


_POLLS = {WORK_TOPIC: "work", SCHEDULE_TOPIC: "schedules"}
"""The poll whose memory each topic's wait consults: ``lease``, ``lease_schedules``."""


def poll_key(topic: str, names: Collection[str]) -> tuple[str, ...] | None:
    """What a world's ``Quiet`` remembers a poll of ``topic`` for ``names`` by (``None``:
    no poll waits on ``topic``)."""
    kind = _POLLS.get(topic)
    return None if kind is None else (kind, *sorted(set(names)))


class _Nothing(NamedTuple):
    token: Hashable
    due: float
    """Monotonic time at which what was seen becomes due (``inf``: nothing seen)."""
    checked: float
    seen: Any
    """What the poll answered with its nothing (a schedule lease's next wake time)."""


class Quiet:
    """What the polls of one world object last found nothing of, by poll."""

    def __init__(self, safety_seconds: float = SAFETY_SECONDS) -> None:
        self._safety = safety_seconds
        self._nothing: dict[Hashable, _Nothing] = {}

    def quiet(self, poll: Hashable, token: Hashable | None) -> bool:
        """Whether ``poll`` would find nothing now: it did, and nothing changed since."""
        found = self._nothing.get(poll)
        if found is None or token is None or found.token != token:
            return False
        now = time.monotonic()
        return now < found.due and now - found.checked < self._safety

    def found(
        self, poll: Hashable, token: Hashable | None, due_in: float | None, seen: Any = None
    ) -> None:
        """``poll``, with ``token`` taken before it, found nothing due; the earliest thing
        it saw is due in ``due_in`` seconds (``None``: nothing at all); ``seen``: what
        it answered besides (``remembered`` gives it back)."""
        if token is None:
            self._nothing.pop(poll, None)
            return
        now = time.monotonic()
        due = float("inf") if due_in is None else now + max(due_in, 0.0)
        self._nothing[poll] = _Nothing(token, due, now, seen)

    def holds(self, poll: Hashable, token: Hashable | None) -> float:
        """Seconds for which ``poll`` stays answered from memory while ``token`` holds
        (0: the next ``poll`` queries)."""
        found = self._nothing.get(poll)
        if found is None or token is None or found.token != token:
            return 0.0
        left = min(found.due, found.checked + self._safety) - time.monotonic()
        return max(left, 0.0)

    def remembered(self, poll: Hashable) -> Any:
        """What ``poll`` last answered besides its nothing (``found``'s ``seen``)."""
        found = self._nothing.get(poll)
        return None if found is None else found.seen

    def forget(self, poll: Hashable) -> None:
        """``poll`` found something: the next one queries."""
        self._nothing.pop(poll, None)


async def wait_idle(
    quiet: Quiet,
    topic: str,
    names: Collection[str],
    token: Callable[[], Hashable | None],
    wait: Callable[[float], Awaitable[None]],
    timeout: float,
) -> None:
    """``World.wait_idle`` over ``quiet``: ``wait(timeout)`` (the world's ``wait`` on
    ``topic``), then ``wait`` again while the poll of ``topic`` for ``names`` would be
    answered from memory under the ``token()`` taken each time. A signal on the topic
    changes the token (its count is part of it), so it ends the wait as it ends
    ``World.wait``."""
    poll = poll_key(topic, names)
    hold = 0.0 if poll is None else quiet.holds(poll, token())
    first = timeout if hold <= 0 else min(timeout, hold)  # a due time within it ends it
    with anyio.move_on_after(first + 1.0):  # a wait that hangs ends as the poll would
        await wait(first)
    if poll is None:
        return
    while (hold := quiet.holds(poll, token())) > 0:
        with anyio.move_on_after(hold + 1.0):
            await wait(hold)
