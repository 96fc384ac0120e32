"""The schedule operations of the memory world (``World.create_schedule`` and the rest).

Schedules live in a dict keyed by id; a lease is the time until which a
schedule is taken, so a second worker leasing before then passes it by.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from worlds._rules import schedules
from worlds.protocol import SCHEDULE_TOPIC
from worlds.semantics import lease_deadline
from worlds.types import ScheduleLease, ScheduleRecord

__all__ = ["ScheduleStore"]


class ScheduleStore:
    """The memory world's schedules and their leases."""

    def __init__(self, clock: Callable[[], datetime], signal: Callable[[str], None]) -> None:
        """Schedules read time from ``clock`` and ``signal`` the schedule topic on change."""
        self._clock = clock
        self._signal = signal
        self._schedules: dict[str, ScheduleRecord] = {}
        self._leases: dict[str, datetime] = {}

    async def create(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        schedules.check_schedule(record)
        if record.id in self._schedules:
            raise schedules.schedule_exists(record.id)
        stored = schedules.created(record, self._clock())
        self._schedules[record.id] = stored
        self._signal(SCHEDULE_TOPIC)
        return stored

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return self._schedules.get(schedule_id)

    async def list(self, *, after: str | None = None, limit: int = 100) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        ids = sorted(i for i in self._schedules if after is None or i > after)
        return [self._schedules[i] for i in ids[:limit]]

    async def update(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        schedules.check_schedule(record)
        stored = self._schedules.get(record.id)
        if stored is None or stored.version != record.version:
            return None
        new = schedules.updated(stored, record, self._clock())
        self._schedules[record.id] = new
        self._leases.pop(record.id, None)
        self._signal(SCHEDULE_TOPIC)
        return new

    async def delete(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._leases.pop(schedule_id, None)
        return self._schedules.pop(schedule_id, None) is not None

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        now, wanted = self._clock(), frozenset(names)
        due: list[ScheduleRecord] = []
        later: datetime | None = None
        for record in self._schedules.values():
            if schedules.is_due(record, self._leases.get(record.id), wanted, now):
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
