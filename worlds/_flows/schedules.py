"""Storing schedules: ``World.create_schedule`` and ``update_schedule``, for every backend.

A new schedule is stored at version 1; an update is a compare-and-set on
``version`` that writes only the mutable fields, one version on, releases the
schedule's lease, and signals ``SCHEDULE_TOPIC`` (``worlds._rules.schedules``).
"""

from __future__ import annotations

from worlds._flows.rows import Rows
from worlds._rules import schedules
from worlds.protocol import SCHEDULE_TOPIC
from worlds.types import ScheduleRecord

__all__ = ["check", "create_schedule", "update_schedule"]


def check(record: ScheduleRecord) -> None:
    """Raise ``ValueError`` if ``record`` cannot be stored (before any transaction)."""
    schedules.check_schedule(record)


async def create_schedule(rows: Rows, record: ScheduleRecord) -> ScheduleRecord:
    """See ``World.create_schedule`` (``record`` checked)."""
    stored = schedules.created(record, rows.now)
    if not await rows.insert_schedule(stored):
        raise schedules.schedule_exists(record.id)
    rows.signal(SCHEDULE_TOPIC)
    return stored


async def update_schedule(rows: Rows, record: ScheduleRecord) -> ScheduleRecord | None:
    """See ``World.update_schedule`` (``record`` checked)."""
    stored = await rows.get_schedule(record.id)
    if stored is None or stored.version != record.version:
        return None
    new = schedules.updated(stored, record, rows.now)
    await rows.put_schedule(new)
    rows.signal(SCHEDULE_TOPIC)
    return new
