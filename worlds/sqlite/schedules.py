"""The schedule operations of the SQLite world (``World.create_schedule`` and the rest).

Times are stored as microseconds since the epoch, like every other table; a
schedule's lease is a ``leased_until`` column that ``update_schedule`` clears.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from datetime import datetime

from worlds._rules import schedules
from worlds.protocol import SCHEDULE_TOPIC
from worlds.semantics import lease_deadline
from worlds.sqlite.codecs import from_micros, to_micros
from worlds.sqlite.connection import Connection
from worlds.sqlite.transactions import Writer, run_once
from worlds.types import ScheduleLease, ScheduleRecord, utcnow

__all__ = [
    "create_schedule",
    "delete_schedule",
    "get_schedule",
    "lease_schedules",
    "list_schedules",
    "update_schedule",
]

_COLUMNS = (
    "id, workflow, spec, paused, note, next_fire_at, buffered_at, wake_at, version, "
    "created_at, updated_at"
)
_INSERT = (
    f"INSERT INTO schedules ({_COLUMNS}, leased_until) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (id) DO NOTHING"
)
_GET = f"SELECT {_COLUMNS} FROM schedules WHERE id = ?"
_LIST = f"SELECT {_COLUMNS} FROM schedules WHERE id > ? ORDER BY id LIMIT ?"
_UPDATE = (
    "UPDATE schedules SET paused = ?, note = ?, next_fire_at = ?, buffered_at = ?, "
    "wake_at = ?, version = version + 1, updated_at = ?, leased_until = NULL "
    f"WHERE id = ? AND version = ? RETURNING {_COLUMNS}"
)
_DELETE = "DELETE FROM schedules WHERE id = ?"
_LEASE = "UPDATE schedules SET leased_until = ? WHERE id = ?"


def _due_sql(names: int) -> tuple[str, str]:
    marks = ", ".join("?" * names)
    due = (
        f"SELECT {_COLUMNS} FROM schedules WHERE paused = 0 AND wake_at IS NOT NULL "
        f"AND wake_at <= ? AND workflow IN ({marks}) "
        "AND (leased_until IS NULL OR leased_until <= ?) ORDER BY wake_at, id LIMIT ?"
    )
    later = (
        "SELECT MIN(wake_at) FROM schedules WHERE paused = 0 AND wake_at IS NOT NULL "
        f"AND wake_at > ? AND workflow IN ({marks})"
    )
    return due, later


def _micros(moment: datetime | None) -> int | None:
    return None if moment is None else to_micros(moment)


def _moment(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


def _record(row: sqlite3.Row) -> ScheduleRecord:
    return ScheduleRecord(
        id=row["id"],
        workflow=row["workflow"],
        spec=bytes(row["spec"]),
        paused=bool(row["paused"]),
        note=row["note"],
        next_fire_at=_moment(row["next_fire_at"]),
        buffered_at=_moment(row["buffered_at"]),
        wake_at=_moment(row["wake_at"]),
        version=row["version"],
        created_at=from_micros(row["created_at"]),
        updated_at=from_micros(row["updated_at"]),
    )


async def create_schedule(connection: Connection, record: ScheduleRecord) -> ScheduleRecord:
    """See ``World.create_schedule``."""
    schedules.check_schedule(record)

    def body(tx: Writer) -> ScheduleRecord:
        stored = schedules.created(record, tx.now)
        params = (
            stored.id,
            stored.workflow,
            stored.spec,
            int(stored.paused),
            stored.note,
            _micros(stored.next_fire_at),
            _micros(stored.buffered_at),
            _micros(stored.wake_at),
            stored.version,
            tx.now_us,
            tx.now_us,
        )
        if not tx.db.execute(_INSERT, params).rowcount:
            raise schedules.schedule_exists(record.id)
        tx.signals.add(SCHEDULE_TOPIC)
        return stored

    return await connection.write(body)


async def get_schedule(connection: Connection, schedule_id: str) -> ScheduleRecord | None:
    """See ``World.get_schedule``."""

    def body(db: sqlite3.Connection) -> ScheduleRecord | None:
        row = db.execute(_GET, (schedule_id,)).fetchone()
        return None if row is None else _record(row)

    return await connection.read(body)


async def list_schedules(
    connection: Connection, after: str | None, limit: int
) -> list[ScheduleRecord]:
    """See ``World.list_schedules``."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")

    def body(db: sqlite3.Connection) -> list[ScheduleRecord]:
        return [_record(row) for row in db.execute(_LIST, (after or "", limit))]

    return await connection.read(body)


async def update_schedule(connection: Connection, record: ScheduleRecord) -> ScheduleRecord | None:
    """See ``World.update_schedule``."""
    schedules.check_schedule(record)

    def body(tx: Writer) -> ScheduleRecord | None:
        params = (
            int(record.paused),
            record.note,
            _micros(record.next_fire_at),
            _micros(record.buffered_at),
            _micros(record.wake_at),
            tx.now_us,
            record.id,
            record.version,
        )
        row = tx.db.execute(_UPDATE, params).fetchone()
        if row is None:
            return None
        tx.signals.add(SCHEDULE_TOPIC)
        return _record(row)

    return await connection.write(body)


async def delete_schedule(connection: Connection, schedule_id: str) -> bool:
    """See ``World.delete_schedule``."""
    return await connection.write(lambda tx: bool(tx.db.execute(_DELETE, (schedule_id,)).rowcount))


async def lease_schedules(
    connection: Connection,
    worker_id: str,
    names: Collection[str],
    limit: int,
    lease_seconds: float,
) -> ScheduleLease:
    """See ``World.lease_schedules``."""
    wanted = sorted(set(names))
    due_sql, later_sql = _due_sql(len(wanted))

    def look(db: sqlite3.Connection, now_us: int) -> tuple[list[sqlite3.Row], int | None]:
        rows = db.execute(due_sql, (now_us, *wanted, now_us, limit)).fetchall()
        (later,) = db.execute(later_sql, (now_us, *wanted)).fetchone()
        return rows, later

    def body(tx: Writer) -> ScheduleLease:
        rows, later = look(tx.db, tx.now_us)
        until = to_micros(lease_deadline(tx.now, lease_seconds))
        tx.db.executemany(_LEASE, [(until, row["id"]) for row in rows])
        next_wake = tx.now if len(rows) >= limit else _moment(later)
        found = tuple(_record(row) for row in rows)
        return ScheduleLease(now=tx.now, schedules=found, next_wake_at=next_wake)

    if limit <= 0 or not wanted:
        return ScheduleLease(now=utcnow())

    def peek(db: sqlite3.Connection, blocking: bool) -> tuple[list[sqlite3.Row], int | None]:
        return run_once(lambda: look(db, to_micros(utcnow())), blocking)

    # Look before taking the write lock, as ``lease`` does: idle workers must
    # not serialize every other process behind them.
    rows, later = await connection.run(peek)
    if not rows:
        return ScheduleLease(now=utcnow(), next_wake_at=_moment(later))
    return await connection.write(body)
