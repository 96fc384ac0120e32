"""The schedule operations of the PostgreSQL world (``World.create_schedule`` and the rest).

Due times are decided by the server's clock, as the world estimates it, like
lease expiry and timers. Leasing is one statement: ``FOR UPDATE SKIP LOCKED``
lets workers on many hosts take disjoint sets of due schedules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from worlds._rules import schedules
from worlds.postgres.transactions import Tx
from worlds.protocol import SCHEDULE_TOPIC
from worlds.semantics import lease_deadline
from worlds.types import ScheduleLease, ScheduleRecord

if TYPE_CHECKING:
    from worlds.postgres.connection import Pool

__all__ = ["ScheduleStore"]

_COLUMNS = (
    "id, workflow, spec, paused, note, next_fire_at, buffered_at, wake_at, version, "
    "created_at, updated_at"
)
_INSERT = (
    f"INSERT INTO schedules ({_COLUMNS}, leased_until) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, NULL) ON CONFLICT (id) DO NOTHING"
)
_GET = f"SELECT {_COLUMNS} FROM schedules WHERE id = $1"
_LIST = f"SELECT {_COLUMNS} FROM schedules WHERE id > $1 ORDER BY id LIMIT $2"
_UPDATE = (
    "UPDATE schedules SET paused = $1, note = $2, next_fire_at = $3, buffered_at = $4, "
    "wake_at = $5, version = version + 1, updated_at = $6, leased_until = NULL "
    f"WHERE id = $7 AND version = $8 RETURNING {_COLUMNS}"
)
_DELETE = "DELETE FROM schedules WHERE id = $1"
_LEASE = (
    "WITH due AS (SELECT id FROM schedules WHERE NOT paused AND wake_at IS NOT NULL "
    "AND wake_at <= $1 AND workflow = ANY($2::text[]) "
    "AND (leased_until IS NULL OR leased_until <= $1) ORDER BY wake_at, id LIMIT $3 "
    "FOR UPDATE SKIP LOCKED) "
    "UPDATE schedules s SET leased_until = $4 FROM due WHERE s.id = due.id "
    f"RETURNING {', '.join('s.' + c.strip() for c in _COLUMNS.split(','))}"
)
_LATER = (
    "SELECT min(wake_at) FROM schedules WHERE NOT paused AND wake_at IS NOT NULL "
    "AND wake_at > $1 AND workflow = ANY($2::text[])"
)


def _record(row: asyncpg.Record) -> ScheduleRecord:
    return ScheduleRecord(
        id=row["id"],
        workflow=row["workflow"],
        spec=bytes(row["spec"]),
        paused=row["paused"],
        note=row["note"],
        next_fire_at=row["next_fire_at"],
        buffered_at=row["buffered_at"],
        wake_at=row["wake_at"],
        version=row["version"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class ScheduleStore:
    """The schedule operations over a world's pool, clock and write transactions."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Pool]],
        write: Callable[[Callable[[Tx], Awaitable[Any]]], Awaitable[Any]],
        now: Callable[[], datetime],
        refresh: Callable[[Pool], Awaitable[None]],
    ) -> None:
        self._connect = connect
        self._write = write
        self._now = now
        self._refresh = refresh

    async def create(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        schedules.check_schedule(record)

        async def body(tx: Tx) -> ScheduleRecord:
            stored = schedules.created(record, tx.now)
            status = await tx.conn.execute(
                _INSERT,
                stored.id,
                stored.workflow,
                stored.spec,
                stored.paused,
                stored.note,
                stored.next_fire_at,
                stored.buffered_at,
                stored.wake_at,
                stored.version,
                tx.now,
            )
            if status.endswith(" 0"):
                raise schedules.schedule_exists(record.id)
            tx.signals.add(SCHEDULE_TOPIC)
            return stored

        result: ScheduleRecord = await self._write(body)
        return result

    async def get(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        row = await (await self._connect()).fetchrow(_GET, schedule_id)
        return None if row is None else _record(row)

    async def list(self, after: str | None, limit: int) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit}")
        rows = await (await self._connect()).fetch(_LIST, after or "", limit)
        return [_record(row) for row in rows]

    async def update(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        schedules.check_schedule(record)

        async def body(tx: Tx) -> ScheduleRecord | None:
            row = await tx.conn.fetchrow(
                _UPDATE,
                record.paused,
                record.note,
                record.next_fire_at,
                record.buffered_at,
                record.wake_at,
                tx.now,
                record.id,
                record.version,
            )
            if row is None:
                return None
            tx.signals.add(SCHEDULE_TOPIC)
            return _record(row)

        result: ScheduleRecord | None = await self._write(body)
        return result

    async def delete(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        status = await (await self._connect()).execute(_DELETE, schedule_id)
        return not status.endswith(" 0")

    async def lease(
        self, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        wanted = sorted(set(names))
        pool = await self._connect()
        await self._refresh(pool)
        now = self._now()
        if limit <= 0 or not wanted:
            return ScheduleLease(now=now)
        until = lease_deadline(now, lease_seconds)
        rows = await pool.fetch(_LEASE, now, wanted, limit, until)
        later = now if len(rows) >= limit else await pool.fetchval(_LATER, now, wanted)
        found = tuple(sorted((_record(row) for row in rows), key=lambda r: (r.wake_at, r.id)))
        return ScheduleLease(now=now, schedules=found, next_wake_at=later)
