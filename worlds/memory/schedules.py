"""Schedules of the memory world, and their leases.

Schedules live in a dict keyed by id; a lease is the time until which a
schedule is taken, so a second worker leasing before then passes it by.
Creating and updating are flows (``worlds._flows.schedules``) over the rows
``insert``, ``get`` and ``put``; leasing is an operation of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from worlds.memory.journal import Journal
from worlds.semantics import lease_deadline, schedule_is_due
from worlds.types import ScheduleLease, ScheduleRecord

__all__ = ["ScheduleStore"]


class ScheduleStore:
    """The memory world's schedules and their leases."""

    def __init__(self, journal: Journal, clock: Callable[[], datetime]) -> None:
        self._journal = journal
        self._clock = clock
        self._schedules: dict[str, ScheduleRecord] = {}
        self._leases: dict[str, datetime] = {}

    def insert(self, record: ScheduleRecord) -> bool:
        """Store a new schedule; False if its id is taken."""
        if record.id in self._schedules:
            return False
        self._journal.put(self._schedules, record.id, record)
        return True

    def get(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or ``None``."""
        return self._schedules.get(schedule_id)

    def put(self, record: ScheduleRecord) -> None:
        """Store the schedule's new state and release its lease."""
        self._journal.put(self._schedules, record.id, record)
        self._journal.pop(self._leases, record.id)

    def list(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        ids = sorted(i for i in self._schedules if after is None or i > after)
        return [self._schedules[i] for i in ids[:limit]]

    def delete(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._leases.pop(schedule_id, None)
        return self._schedules.pop(schedule_id, None) is not None

    def next_wake(self, names: Collection[str]) -> datetime | None:
        """The earliest wake time of an unpaused schedule of a workflow in ``names``."""
        wanted = frozenset(names)
        wakes = [
            record.wake_at
            for record in self._schedules.values()
            if not record.paused and record.workflow in wanted and record.wake_at is not None
        ]
        return min(wakes, default=None)

    def leases_end(self, names: Collection[str], now: datetime) -> datetime | None:
        """When the first schedule lease of ``names`` workflows held at ``now`` runs out."""
        wanted = frozenset(names)
        ends = [
            until
            for schedule_id, until in self._leases.items()
            if until > now
            and (record := self._schedules.get(schedule_id)) is not None
            and not record.paused
            and record.workflow in wanted
        ]
        return min(ends, default=None)

    def busy(self, names: Collection[str]) -> bool:
        """True while a schedule of a workflow in ``names`` is due or leased."""
        now, wanted = self._clock(), frozenset(names)
        return any(
            schedule_is_due(record, None, wanted, now) or self._leases.get(record.id, now) > now
            for record in self._schedules.values()
            if record.workflow in wanted
        )

    def workflows(self) -> frozenset[str]:
        """The workflows of the unpaused schedules."""
        return frozenset(r.workflow for r in self._schedules.values() if not r.paused)

    def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        now, wanted = self._clock(), frozenset(names)
        due: list[ScheduleRecord] = []
        later: datetime | None = None
        for record in self._schedules.values():
            if schedule_is_due(record, self._leases.get(record.id), wanted, now):
                due.append(record)
            elif (
                not record.paused
                and record.workflow in wanted
                and record.wake_at is not None
                and record.wake_at > now
                and (later is None or record.wake_at < later)
            ):
                later = record.wake_at
        due.sort(key=lambda record: (record.wake_at or now, record.id))
        if len(due) > limit:
            later = now
        taken = due[: max(limit, 0)]
        for record in taken:
            self._leases[record.id] = lease_deadline(now, lease_seconds)
        return ScheduleLease(now=now, schedules=tuple(taken), next_wake_at=later)
