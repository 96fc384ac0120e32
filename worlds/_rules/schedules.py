"""Schedules: what a world checks, stores and leases (``rfcs/0009-schedules.md``).

A world keeps each schedule's state and hands a due one to one worker at a
time; the worker decides the fire times and starts the runs. Every write
after creation is a compare-and-set on ``version``, so a pause and a fire
racing each other never overwrite one another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

import msgspec

from worlds.types import ScheduleFire, ScheduleRecord

__all__ = [
    "SCHEDULE_ID",
    "check_schedule",
    "created",
    "fired",
    "is_due",
    "schedule_exists",
    "updated",
]

SCHEDULE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,191}")
"""A schedule id: 1-191 letters, digits, ``.``, ``_``, ``-``, ``:`` (it goes in URLs and shells)."""


def check_schedule(record: ScheduleRecord) -> None:
    """Raise ``ValueError`` if ``record`` cannot be stored; nothing is written then."""
    if not isinstance(record.id, str) or not SCHEDULE_ID.fullmatch(record.id):
        raise ValueError(
            f"schedule id {record.id!r} must be 1-191 characters of letters, digits, "
            "'.', '_', '-', ':'"
        )
    if not record.workflow:
        raise ValueError("a schedule needs the name of the workflow it starts")
    for name in ("next_fire_at", "buffered_at", "wake_at"):
        value = getattr(record, name)
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            raise ValueError(f"schedule {name} must be an aware datetime, got {value!r}")


def schedule_exists(schedule_id: str) -> ValueError:
    """The error ``create_schedule`` raises when ``schedule_id`` is taken."""
    return ValueError(
        f"schedule {schedule_id} already exists; choose another id or delete it first"
    )


def created(record: ScheduleRecord, now: datetime) -> ScheduleRecord:
    """``record`` as first stored: version 1, created and updated ``now``."""
    return msgspec.structs.replace(record, version=1, created_at=now, updated_at=now)


def updated(stored: ScheduleRecord, new: ScheduleRecord, now: datetime) -> ScheduleRecord:
    """``stored`` with the mutable fields of ``new``, one version on.

    The id, workflow, spec and creation time never change after creation.
    """
    return msgspec.structs.replace(
        stored,
        paused=new.paused,
        note=new.note,
        next_fire_at=new.next_fire_at,
        buffered_at=new.buffered_at,
        wake_at=new.wake_at,
        version=stored.version + 1,
        updated_at=now,
    )


def fired(
    stored: ScheduleRecord,
    fire: ScheduleFire,
    buffered_blocked: bool,
    blocked: Sequence[bool],
    now: datetime,
) -> ScheduleRecord:
    """``stored`` after the round ``fire``, one version on (``ScheduleFire`` says how).

    ``buffered_blocked``: the buffered fire was refused again (it stays
    buffered); ``blocked``: for each of ``fire.fires``, whether the overlap
    rule refused it (an open run holds the schedule's pair).
    """
    buffered = stored.buffered_at if fire.buffered is not None and buffered_blocked else None
    if fire.buffer:
        for each, refused in zip(fire.fires, blocked, strict=True):
            if refused and buffered is None:
                buffered = each.at
    wake = fire.next_fire_at
    if buffered is not None and fire.recheck_at is not None:
        wake = fire.recheck_at if wake is None else min(wake, fire.recheck_at)
    state = msgspec.structs.replace(
        stored, next_fire_at=fire.next_fire_at, buffered_at=buffered, wake_at=wake
    )
    return updated(stored, state, now)


def is_due(
    record: ScheduleRecord,
    leased_until: datetime | None,
    names: frozenset[str],
    now: datetime,
) -> bool:
    """Whether a worker running ``names`` may lease ``record`` at ``now``."""
    return (
        not record.paused
        and record.workflow in names
        and record.wake_at is not None
        and record.wake_at <= now
        and (leased_until is None or leased_until <= now)
    )
