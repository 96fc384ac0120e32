"""The schedule operations of the PostgreSQL world (``World.create_schedule`` and the rest).

Creating and updating are flows (``worlds._flows.schedules``) in a transaction
of the world's; reads and leasing are queries. Due times are decided by the
server's clock, as the world estimates it, like lease expiry and timers.
Leasing is one statement: ``FOR UPDATE SKIP LOCKED`` lets workers on many
hosts take disjoint sets of due schedules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Hashable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from worlds._flows import schedules
from worlds._quiet import Quiet, poll_key
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.postgres.rows import PostgresRows
from worlds.protocol import SCHEDULE_TOPIC
from worlds.semantics import lease_deadline
from worlds.types import ScheduleFire, ScheduleLease, ScheduleRecord

if TYPE_CHECKING:
    from worlds.postgres.connection import Pool

__all__ = ["ScheduleStore"]

FireOutcomes = list[ScheduleRecord | Exception | None]
"""What ``fire`` answers (a name: ``list`` is a method of the store)."""


class ScheduleStore:
    """The schedule operations over a world's pool, clock and write transactions."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Pool]],
        write: Callable[[Callable[[PostgresRows], Awaitable[Any]]], Awaitable[Any]],
        now: Callable[[], datetime],
        refresh: Callable[[Pool], Awaitable[None]],
        quiet: Quiet,
        heard: Callable[[str], Hashable | None],
    ) -> None:
        self._connect = connect
        self._write = write
        self._now = now
        self._refresh = refresh
        self._quiet = quiet
        self._heard = heard

    async def create(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        schedules.check(record)
        created: ScheduleRecord = await self._write(
            lambda rows: schedules.create_schedule(rows, record)
        )
        return created

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        row = await (await self._connect()).fetchrow(sql.GET_SCHEDULE, schedule_id)
        return None if row is None else codecs.columns.schedule(row)

    async def list(self, after: str | None, limit: int) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        rows = await (await self._connect()).fetch(sql.LIST_SCHEDULES, after or "", limit)
        return [codecs.columns.schedule(row) for row in rows]

    async def update(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        schedules.check(record)
        updated: ScheduleRecord | None = await self._write(
            lambda rows: schedules.update_schedule(rows, record)
        )
        return updated

    async def fire(self, fires: Sequence[ScheduleFire]) -> FireOutcomes:
        """See ``World.fire_schedules``."""
        batch = schedules.check_fires(fires)
        if not batch:
            return []
        fired: FireOutcomes = await self._write(lambda rows: schedules.fire_schedules(rows, batch))
        return fired

    async def delete(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        status = await (await self._connect()).execute(sql.DELETE_SCHEDULE, schedule_id)
        return not status.endswith(" 0")

    async def lease(
        self, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        wanted = sorted(set(names))
        pool = await self._connect()
        poll, token = poll_key(SCHEDULE_TOPIC, wanted), self._heard(SCHEDULE_TOPIC)
        if limit > 0 and wanted and self._quiet.quiet(poll, token):
            return ScheduleLease(now=self._now(), next_wake_at=self._quiet.remembered(poll))
        await self._refresh(pool)
        now = self._now()
        if limit <= 0 or not wanted:
            return ScheduleLease(now=now)
        until = lease_deadline(now, lease_seconds)
        rows = await pool.fetch(sql.LEASE_SCHEDULES, now, wanted, limit, until)
        later = (
            now if len(rows) >= limit else await pool.fetchval(sql.NEXT_SCHEDULE_WAKE, now, wanted)
        )
        if rows:
            self._quiet.forget(poll)
        else:
            ends = await pool.fetchval(sql.SCHEDULE_LEASES_END, now, wanted)
            look_at = min((t for t in (later, ends) if t is not None), default=None)
            due_in = None if look_at is None else (look_at - now).total_seconds()
            self._quiet.found(poll, token, due_in, later)
        found = tuple(sorted((codecs.columns.schedule(row) for row in rows), key=_lease_order))
        return ScheduleLease(now=now, schedules=found, next_wake_at=later)


def _lease_order(record: ScheduleRecord) -> tuple[datetime | None, str]:
    return (record.wake_at, record.id)
