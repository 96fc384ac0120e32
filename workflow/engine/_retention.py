"""The worker's retention loop: prune the closed runs past their status's window.

Every ``interval`` seconds (and once at start) the loop reads the world's
retention windows (``workflow.set_retention``; four setting reads) and, when
there are any, prunes the runs past them in batches of ``BATCH``
(``World.prune_expired``, one short transaction each, pinned runs passed
over, claims kept as tombstones), yielding between batches so the worker's
own commits go between them. Each sweep also prunes the slot history older
than its default window (``World.prune_slot_history``, two days: the flow
view's longest chart is one), whether or not runs have retention windows:
samples accrue while slots change, runs or no runs. Every worker runs it: the prunes are atomic and
pass over rows another transaction holds, so two workers pruning at once
prune each run once. A world without the operation (a third-party world of
an older protocol) is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from workflow._retention import read_windows
from workflow.engine._faults import Backoff, Complaints, is_fatal
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import World

__all__ = ["BATCH", "RetentionLoop"]

log = logging.getLogger("workflow.worker")

BATCH = 500
"""Runs pruned per transaction: tens of milliseconds of SQLite's write lock at most."""


class RetentionLoop:
    """Applies the world's retention windows, until stopped."""

    def __init__(
        self,
        world: World,
        worker_id: str,
        *,
        interval: float | None,
        complaints: Complaints,
        fail: Callable[[WorldMisconfiguredError], None],
    ) -> None:
        self.world = world
        self.worker_id = worker_id
        self.interval = interval
        self._complaints = complaints
        self._fail = fail
        self.pruned = 0
        """Runs this loop pruned."""
        self.samples_pruned = 0
        """Slot-history samples this loop pruned."""

    async def run(self, stopping: Callable[[], bool]) -> None:
        """Sweep every ``interval`` seconds until ``stopping()`` is true."""
        if self.interval is None or not callable(getattr(self.world, "prune_expired", None)):
            return
        backoff = Backoff(cap=self.interval)
        while not stopping():
            try:
                await self.sweep(stopping)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                delay = backoff.next()
                self._complaints.failed("apply retention", exc, delay)
                await anyio.sleep(delay)
                continue
            backoff.reset()
            await anyio.sleep(self.interval)

    async def sweep(self, stopping: Callable[[], bool]) -> None:
        """Prune the old slot history and every run past its window now, a batch per
        transaction."""
        await self._prune_history(stopping)
        keep = await read_windows(self.world)
        while keep and not stopping():
            pruned = await self.world.prune_expired(keep, BATCH)
            self.pruned += len(pruned)
            if pruned:
                log.info("worker %s: retention pruned %d run(s)", self.worker_id, len(pruned))
            if len(pruned) < BATCH:
                return
            await anyio.sleep(0)  # let this worker's commits in between batches

    async def _prune_history(self, stopping: Callable[[], bool]) -> None:
        """Prune slot-history samples past the world's default window, a batch at a time."""
        prune = getattr(self.world, "prune_slot_history", None)
        if not callable(prune):  # a third-party world of an older protocol
            return
        while not stopping():
            dropped = int(await prune(limit=BATCH))
            self.samples_pruned += dropped
            if dropped < BATCH:
                return
            await anyio.sleep(0)
