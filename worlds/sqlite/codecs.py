"""Row <-> record codecs of the SQLite world.

Times are stored as integer microseconds since the Unix epoch, so comparisons in
SQL are exact. Events, attribute maps and claim values are msgpack blobs.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any, cast, get_args

import msgspec

from worlds import _columns
from worlds._columns import Columns
from worlds._flows.rows import Placement
from worlds.types import (
    EPOCH,
    EventKind,
    NewWorkItem,
    RunRecord,
    ScheduleRecord,
    WorkItem,
)

_MICROSECOND = timedelta(microseconds=1)
_EVENT_DECODER = msgspec.msgpack.Decoder(EventKind)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (moment - EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=micros)


def to_micros_or_none(moment: datetime | None) -> int | None:
    """``to_micros`` of a time that may be missing."""
    return None if moment is None else to_micros(moment)


def from_micros_or_none(micros: int | None) -> datetime | None:
    """``from_micros`` of a column that may be NULL."""
    return None if micros is None else from_micros(micros)


columns = Columns(from_micros)
"""Records from rows by column name (``worlds._columns``), times in microseconds."""

encode = _columns.encode


def run_update_params(run: RunRecord, attributes: bytes) -> tuple[object, ...]:
    """Parameters of ``UPDATE_RUN`` that store ``run`` (``attributes`` pre-encoded)."""
    return (
        run.status.value,
        None if run.started_at is None else to_micros(run.started_at),
        None if run.closed_at is None else to_micros(run.closed_at),
        run.last_seq,
        attributes,
        run.result,
        None if run.error is None else encode(run.error),
        run.id,
    )


def run_state_params(run: RunRecord) -> tuple[object, ...]:
    """Parameters of ``UPDATE_RUN_STATE`` that store ``run`` but its attributes."""
    return (
        run.status.value,
        None if run.started_at is None else to_micros(run.started_at),
        None if run.closed_at is None else to_micros(run.closed_at),
        run.last_seq,
        run.result,
        None if run.error is None else encode(run.error),
        run.id,
    )


EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_event(data: bytes) -> EventKind:
    """An event from its msgpack blob."""
    event: EventKind = _EVENT_DECODER.decode(data)
    return event


def leased(row: sqlite3.Row, *, attempt: int, token: int, expires: int) -> WorkItem:
    """The ``WorkItem`` a worker holds once it leased the item in the ``work`` ``row``.

    ``attempt``, ``token`` and ``expires`` are the lease's, which the row read
    before the lease was taken does not have yet.
    """
    return WorkItem(
        id=row["id"],
        run_id=row["run_id"],
        kind=cast(Any, row["kind"]),
        name=row["name"],
        number=row["number"],
        attempt=attempt,
        payload=row["payload"],
        token=token,
        lease_expires_at=from_micros(expires),
    )


def work_params(run_id: str, new: NewWorkItem, placed: Placement) -> tuple[object, ...]:
    """Parameters of ``INSERT_WORK_IF_ABSENT`` and ``REPLACE_WORK`` that store ``placed``."""
    expires = None if placed.expires_at is None else to_micros(placed.expires_at)
    leased = int(placed.leased is not None)
    item = (run_id, placed.item_id, new.kind, placed.name, new.number, new.attempt, new.payload)
    return (*item, to_micros(placed.available_at), placed.owner, placed.token, expires, leased)


def schedule_params(record: ScheduleRecord) -> tuple[object, ...]:
    """Parameters of ``INSERT_SCHEDULE`` that store ``record``."""
    return (
        record.id,
        record.workflow,
        record.spec,
        int(record.paused),
        record.note,
        to_micros_or_none(record.next_fire_at),
        to_micros_or_none(record.buffered_at),
        to_micros_or_none(record.wake_at),
        record.version,
        to_micros(record.created_at),
        to_micros(record.updated_at),
    )
