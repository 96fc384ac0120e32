"""The worker's schedule loop: lease due schedules, fire them, sleep until the next.

One loop per worker serves every schedule whose workflow the worker runs.
The world keeps each schedule's next wake time in an index (like a timer's
due time) and leases a due schedule to one worker at a time; the loop sleeps
until the earliest wake time or a ``SCHEDULE_TOPIC`` signal, at most the
worker's poll interval, or on while the world can tell that nothing changed
(``World.wait_idle``, ``rfcs/0018``). A thousand idle schedules cost one
indexed query per change of the world, not a thousand timers.

The fires of a lease are planned here (``plan_round``: the fire times, their
starts) and stored by the world in batches, ``World.fire_schedules``: one
transaction for every due fire of up to ``FIRES_PER_TRANSACTION`` fires, so
ten thousand schedules due at one instant cost tens of transactions, not
twenty thousand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from workflow._schedule_fire import plan_round
from workflow.engine._faults import Backoff, Complaints, is_fatal
from workflow.engine._idle import IdleWait
from worlds.codec import check_plain_write
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import SCHEDULE_TOPIC, World
from worlds.types import ScheduleFire, ScheduleLease, ScheduleRecord

__all__ = ["BATCH", "FIRES_PER_TRANSACTION", "MAX_LEASE_SECONDS", "ScheduleLoop"]

log = logging.getLogger("workflow.worker")

BATCH = 1024
"""Due schedules leased at once."""

FIRES_PER_TRANSACTION = 512
"""Most fires in one ``fire_schedules`` transaction: a batch holds SQLite's write lock
for tens of milliseconds, not seconds, even when schedules catch up on many fires."""

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
        idle: IdleWait | None = None,
    ) -> None:
        self.world = world
        self._idle = IdleWait(world) if idle is None else idle
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
            await self._sleep(lease, names)

    async def _sleep(self, lease: ScheduleLease, names: frozenset[str]) -> None:
        timeout = self.poll_interval
        if lease.next_wake_at is not None:
            until = (lease.next_wake_at - lease.now).total_seconds()
            timeout = max(0.0, min(timeout, until))
        if timeout <= 0:
            await anyio.sleep(0)
            return
        # past ``timeout`` only while the world can tell the poll would find nothing
        await self._idle.wait(SCHEDULE_TOPIC, names, timeout)

    async def _fire_all(self, lease: ScheduleLease) -> None:
        """Plan every leased schedule's round and store them, a batch per transaction."""
        batch: list[ScheduleFire] = []
        fires = 0
        for record in lease.schedules:
            try:
                planned = plan_round(record, lease.now)
            except Exception as exc:  # a spec this code cannot read: its lease runs out
                self._complaints.failed(f"fire schedule {record.id}", exc, self.lease_seconds)
                continue
            if batch and fires + len(planned.fires) > FIRES_PER_TRANSACTION:
                await self._store(batch)
                batch, fires = [], 0
            batch.append(planned)
            fires += len(planned.fires)
        if batch:
            await self._store(batch)

    async def _store(self, batch: list[ScheduleFire]) -> None:
        await check_plain_write(self.world)  # the runs' arguments are payloads
        outcomes = await self.world.fire_schedules(batch)
        for planned, outcome in zip(batch, outcomes, strict=True):
            self._outcome(planned.record, outcome)

    def _outcome(self, record: ScheduleRecord, outcome: ScheduleRecord | Exception | None) -> None:
        if isinstance(outcome, Exception):
            if (fatal := is_fatal(outcome)) is not None:
                self._fail(fatal)
                return
            # Its lease runs out and a later round (here or elsewhere) tries again;
            # fires already started are found by their run id, not started twice.
            self._complaints.failed(f"fire schedule {record.id}", outcome, self.lease_seconds)
            return
        self.fired += 1
        if outcome is None:
            log.debug("schedule %s changed while firing; its new state wins", record.id)
