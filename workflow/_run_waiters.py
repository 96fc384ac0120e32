"""Waiting for runs to close: one reader per world and event loop, however many wait.

``Run.result`` waits here. Each waiter registers its run; one of them, the
reader, waits on the world's ``RUNS_TOPIC`` (signalled whenever any run may
have closed, from this process or, PostgreSQL, from any) for at most
``POLL_SECONDS``, then asks the world in one query which of all the waited runs
are closed and wakes their waiters with the records. So a process with 2,000
``result()`` calls in flight costs the world one subscription and one read per
wake-up, not 2,000 reads a second, which used to delay everything else the
world serves (a worker's timers fired many seconds late).

The reader is one of the waiters, not a background task (a client call has no
task group to run one in): when its run closes, or it times out or is
cancelled, the role passes to another waiter. Waiters of different event loops
(the sync client's thread) have readers of their own.

A few waiters (``SOLO_WAITERS`` at most) each wait on their own run's topic and
re-read only their run, as one waiter always did: exact wake-ups, no batched
read on every other run's closing. While closings keep coming, the reader
spends at most half its time reading (after a read that took ``d`` seconds it
waits ``d`` before the next one), so a storm of closings with thousands of
waiters cannot keep the world busy with reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel

from worlds.protocol import RUNS_TOPIC, World, run_topic
from worlds.query import FieldRef, In, RunQuery
from worlds.types import RunRecord, RunStatus

__all__ = ["POLL_SECONDS", "SOLO_WAITERS", "wait_closed"]

POLL_SECONDS = 1.0
"""Longest time between two reads while runs are waited on: what notices a run
closed by a process whose signals do not reach this one (another SQLite
process; a PostgreSQL listener that is down)."""

SOLO_WAITERS = 64
"""Up to this many waiters on a world (per event loop), each waits on its own run."""

_BATCH = 1000
"""Run ids per query: one read covers this many waited runs."""

_CLOSED = frozenset(status for status in RunStatus if status.is_closed)


class _Waiter:
    """One ``wait_closed`` call: its run, its wake-up, and the closed record once read."""

    __slots__ = ("record", "run_id", "woken")

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.woken = anyio.Event()
        self.record: RunRecord | None = None


class _Watch:
    """The waiters of one world on one event loop, and which of them reads for all."""

    def __init__(self, world: World, key: tuple[int, anyio.lowlevel.EventLoopToken]) -> None:
        self._world = world
        self._key = key
        self._by_run: dict[str, set[_Waiter]] = {}
        self._reader: _Waiter | None = None
        self._solo = 0

    async def wait(self, run_id: str, timeout: float, unread: bool) -> RunRecord | None:
        if self._solo + len(self._by_run) < SOLO_WAITERS:
            self._solo += 1
            try:  # the caller reads its run again when this returns
                await self._world.wait(run_topic(run_id), min(timeout, POLL_SECONDS))
            finally:
                self._solo -= 1
                self._forget()
            return None
        if unread:
            # the reader reads only after the next closing: the caller reads first
            return None
        waiter = _Waiter(run_id)
        self._by_run.setdefault(run_id, set()).add(waiter)
        try:
            with anyio.move_on_after(timeout):
                while waiter.record is None:
                    if self._reader is None:
                        self._reader = waiter
                        try:
                            await self._read_until_closed(waiter)
                        finally:
                            self._reader = None
                    else:
                        waiter.woken = anyio.Event()
                        await waiter.woken.wait()
            return waiter.record
        finally:
            self._leave(waiter)

    async def _read_until_closed(self, reader: _Waiter) -> None:
        # The caller read its run just before it waited: wait first, then read. A
        # run that closed in between signalled RUNS_TOPIC, which the world keeps
        # for this wait (or the reader's wait in progress hears it).
        while reader.record is None:
            await self._world.wait(RUNS_TOPIC, POLL_SECONDS)
            began = anyio.current_time()
            await self._read(list(self._by_run))
            await anyio.sleep(anyio.current_time() - began)  # reads take at most half the time

    async def _read(self, run_ids: Sequence[str]) -> None:
        for start in range(0, len(run_ids), _BATCH):
            batch = tuple(run_ids[start : start + _BATCH])
            query = RunQuery(statuses=_CLOSED, where=In(FieldRef("id"), batch), limit=len(batch))
            page = await self._world.list_runs(query)
            for record in page.runs:
                for waiter in self._by_run.get(record.id, ()):
                    waiter.record = record
                    waiter.woken.set()

    def _leave(self, waiter: _Waiter) -> None:
        waiters = self._by_run.get(waiter.run_id)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._by_run[waiter.run_id]
        if not self._by_run:
            self._forget()
        elif self._reader is None:  # the reader left: another waiter takes over
            other = next(iter(next(iter(self._by_run.values()))))
            other.woken.set()

    def _forget(self) -> None:
        """Leave the registry once nobody waits here."""
        if not self._by_run and not self._solo:
            _watches.pop(self._key, None)


_watches: dict[tuple[int, anyio.lowlevel.EventLoopToken], _Watch] = {}
"""The open watches, by world object and event loop; a watch leaves when its
last waiter does, so nothing outlives the loop or the world it served."""


async def wait_closed(
    world: World, run_id: str, timeout: float, *, unread: bool = False
) -> RunRecord | None:
    """Wait until run ``run_id`` of ``world`` is closed, or ``timeout`` seconds pass.

    Returns the closed run's record as read, or ``None`` after ``timeout`` (the
    caller reads the run again: it may have closed meanwhile). ``unread``: the
    caller has not read the run since it saw it pending; a solo waiter waits on
    its run's topic all the same (a signal nobody waited for is kept), while
    with many waiters this returns at once and the caller reads first.
    """
    key = (id(world), anyio.lowlevel.current_token())
    watch = _watches.get(key)
    if watch is None:
        watch = _watches[key] = _Watch(world, key)
    return await watch.wait(run_id, timeout, unread)
