"""The worker's schedule loop: lease due schedules, fire them, sleep until the next.

One loop per worker serves every schedule whose workflow the worker runs.
The world keeps each schedule's next wake time in an index (like a timer's
due time) and leases a due schedule to one worker at a time; the loop sleeps
until the earliest wake time or a ``SCHEDULE_TOPIC`` signal, at most the
worker's poll interval. A thousand idle schedules cost one indexed query per
poll, not a thousand timers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from workflow._schedule_fire import fire_due
from workflow.engine._faults import Backoff, Complaints, is_fatal
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import SCHEDULE_TOPIC, World
from worlds.types import ScheduleLease, ScheduleRecord

__all__ = ["BATCH", "FIRING_CONCURRENCY", "MAX_LEASE_SECONDS", "ScheduleLoop"]

log = logging.getLogger("workflow.worker")

BATCH = 256
"""Due schedules leased at once."""

FIRING_CONCURRENCY = 16
"""Schedules of one batch fired at the same time."""

MAX_LEASE_SECONDS = 10.0
"""A schedule lease lasts at most this long: a round takes milliseconds, and a worker
that died holding one delays that schedule's fires by no more than this."""


class ScheduleLoop:
    """Fires the due schedules of the workflows a worker runs, until stopped."""

    def __init__(
        self,
        world: World,
        worker_id: str,
        names: Callable[[], frozenset[str]],
        *,
        lease_seconds: float,
        poll_interval: float,
        complaints: Complaints,
        fail: Callable[[WorldMisconfiguredError], None],
    ) -> None:
        self.world = world
        self.worker_id = worker_id
        self._names = names
        self.lease_seconds = min(lease_seconds, MAX_LEASE_SECONDS)
        self.poll_interval = poll_interval
        self._complaints = complaints
        self._fail = fail
        self.fired = 0
        """Schedule leases handled by this loop (each may fire several times)."""

    async def run(self, stopping: Callable[[], bool]) -> None:
        """Lease and fire due schedules until ``stopping()`` is true."""
        if not callable(getattr(self.world, "lease_schedules", None)):
            log.info("worker %s: this world keeps no schedules", self.worker_id)
            return
        backoff = Backoff(cap=self.lease_seconds / 6)
        while not stopping():
            names = self._names()
            if not names:  # ``Worker.register`` may give it workflows later
                await anyio.sleep(self.poll_interval)
                continue
            try:
                lease = await self.world.lease_schedules(
                    self.worker_id, names=names, limit=BATCH, lease_seconds=self.lease_seconds
                )
                await self._fire_all(lease)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                delay = max(backoff.next(), self.poll_interval)
                self._complaints.failed("fire schedules", exc, delay)
                await anyio.sleep(delay)
                continue
            backoff.reset()
            self._complaints.succeeded("fire schedules")
            if len(lease.schedules) >= BATCH:
                continue
            await self._sleep(lease)

    async def _sleep(self, lease: ScheduleLease) -> None:
        timeout = self.poll_interval
        if lease.next_wake_at is not None:
            until = (lease.next_wake_at - lease.now).total_seconds()
            timeout = max(0.0, min(timeout, until))
        if timeout <= 0:
            await anyio.sleep(0)
            return
        try:
            with anyio.move_on_after(timeout + 1.0):
                await self.world.wait(SCHEDULE_TOPIC, timeout)
        except Exception:
            await anyio.sleep(timeout)

    async def _fire_all(self, lease: ScheduleLease) -> None:
        if not lease.schedules:
            return
        limiter = anyio.CapacityLimiter(FIRING_CONCURRENCY)
        async with anyio.create_task_group() as group:
            for record in lease.schedules:
                group.start_soon(self._fire_one, record, lease, limiter)

    async def _fire_one(
        self, record: ScheduleRecord, lease: ScheduleLease, limiter: anyio.CapacityLimiter
    ) -> None:
        async with limiter:
            try:
                stored = await fire_due(self.world, record, lease.now)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                # Its lease runs out and a later round (here or elsewhere) tries again;
                # fires already started are found by their run id, not started twice.
                self._complaints.failed(f"fire schedule {record.id}", exc, self.lease_seconds)
                return
            self.fired += 1
            if stored is None:
                log.debug("schedule %s changed while firing; its new state wins", record.id)
