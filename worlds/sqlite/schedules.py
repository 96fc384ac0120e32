"""The schedule operations of the SQLite world (``World.create_schedule`` and the rest).

Creating and updating are flows (``worlds._flows.schedules``) over the write
transaction's rows; reads and leasing are queries here. Times are stored as
microseconds since the epoch, like every other table; a schedule's lease is a
``leased_until`` column that an update clears.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence

from worlds._flows import schedules
from worlds._flows.stepper import run_sync
from worlds._quiet import poll_key
from worlds.protocol import SCHEDULE_TOPIC
from worlds.semantics import lease_deadline
from worlds.sqlite import codecs
from worlds.sqlite import statements as sql
from worlds.sqlite.connection import Connection
from worlds.sqlite.idle import IdleLook, Looked
from worlds.sqlite.rows import Executes, SqliteRows
from worlds.sqlite.transactions import run_once
from worlds.types import ScheduleFire, ScheduleLease, ScheduleRecord, utcnow

__all__ = [
    "create_schedule",
    "delete_schedule",
    "fire_schedules",
    "get_schedule",
    "lease_schedules",
    "list_schedules",
    "update_schedule",
]


async def create_schedule(connection: Connection, record: ScheduleRecord) -> ScheduleRecord:
    """See ``World.create_schedule``."""
    schedules.check(record)
    return await connection.write(lambda tx: run_sync(schedules.create_schedule(tx, record)))


async def get_schedule(connection: Connection, schedule_id: str) -> ScheduleRecord | None:
    """See ``World.get_schedule``."""

    def body(db: sqlite3.Connection) -> ScheduleRecord | None:
        row = db.execute(sql.GET_SCHEDULE, (schedule_id,)).fetchone()
        return None if row is None else codecs.columns.schedule(row)

    return await connection.read(body)


async def list_schedules(
    connection: Connection, after: str | None, limit: int
) -> list[ScheduleRecord]:
    """See ``World.list_schedules``."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")

    def body(db: sqlite3.Connection) -> list[ScheduleRecord]:
        rows = db.execute(sql.LIST_SCHEDULES, (after or "", limit))
        return [codecs.columns.schedule(row) for row in rows]

    return await connection.read(body)


async def update_schedule(connection: Connection, record: ScheduleRecord) -> ScheduleRecord | None:
    """See ``World.update_schedule``."""
    schedules.check(record)
    return await connection.write(lambda tx: run_sync(schedules.update_schedule(tx, record)))


async def fire_schedules(
    connection: Connection, fires: Sequence[ScheduleFire]
) -> list[ScheduleRecord | Exception | None]:
    """See ``World.fire_schedules``."""
    batch = schedules.check_fires(fires)
    if not batch:
        return []
    return await connection.write(lambda tx: run_sync(schedules.fire_schedules(tx, batch)))


async def delete_schedule(connection: Connection, schedule_id: str) -> bool:
    """See ``World.delete_schedule``."""
    return await connection.write(
        lambda tx: bool(tx.db.execute(sql.DELETE_SCHEDULE, (schedule_id,)).rowcount)
    )


async def lease_schedules(
    connection: Connection,
    worker_id: str,
    names: Collection[str],
    limit: int,
    lease_seconds: float,
    idle: IdleLook,
) -> ScheduleLease:
    """See ``World.lease_schedules``; a poll that found nothing is answered from
    memory while the file is unchanged (``worlds.sqlite.idle``)."""
    wanted = sorted(set(names))
    due_sql, later_sql = sql.due_schedules_sql(len(wanted))

    def look(db: Executes, now_us: int) -> tuple[list[sqlite3.Row], int | None]:
        rows = db.execute(due_sql, (now_us, *wanted, now_us, limit)).fetchall()
        (later,) = db.execute(later_sql, (now_us, *wanted)).fetchone()
        return rows, later

    def body(tx: SqliteRows) -> ScheduleLease:
        rows, later = look(tx.db, tx.now_us)
        until = codecs.to_micros(lease_deadline(tx.now, lease_seconds))
        tx.db.executemany(sql.LEASE_SCHEDULE, [(until, row["id"]) for row in rows])
        next_wake = tx.now if len(rows) >= limit else codecs.from_micros_or_none(later)
        found = tuple(codecs.columns.schedule(row) for row in rows)
        return ScheduleLease(now=tx.now, schedules=found, next_wake_at=next_wake)

    if limit <= 0 or not wanted:
        return ScheduleLease(now=utcnow())
    if idle.quiet_poll(SCHEDULE_TOPIC, tuple(wanted)):
        remembered = idle.quiet.remembered(poll_key(SCHEDULE_TOPIC, wanted))
        return ScheduleLease(now=utcnow(), next_wake_at=remembered)

    def peek(db: sqlite3.Connection, blocking: bool) -> Looked:
        return run_once(lambda: idle.look(db, SCHEDULE_TOPIC), blocking)

    # Look before taking the write lock, as ``lease`` does: idle workers must
    # not serialize every other process behind them (one statement for both polls).
    looked = await connection.run(peek)
    if not looked.due:
        return ScheduleLease(now=utcnow(), next_wake_at=looked.wake)
    return await connection.write(body)
