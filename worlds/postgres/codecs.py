"""Row <-> record codecs of the PostgreSQL world (msgpack ``bytea`` columns).

Records are read by column name as ``worlds._columns`` reads them for both SQL
worlds; what is PostgreSQL's own: events stored with seq 0 (their seq and at
are the columns), the parameters of ``SAVE_RUN``, the rows of ``LEASE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import get_args

import msgspec
from asyncpg import Record

from worlds import _columns
from worlds._columns import Columns
from worlds.types import (
    EventKind,
    RunRecord,
    WorkItem,
)

_decode_event = msgspec.msgpack.Decoder(EventKind).decode


def _as_is(moment: datetime) -> datetime:
    return moment


columns = Columns(_as_is)
"""Records from rows by column name (``worlds._columns``); times are ``timestamptz``."""

encode = _columns.encode

EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_event(data: bytes, seq: int = 0, at: datetime | None = None) -> EventKind:
    """An event from its msgpack bytes; one stored with seq 0 takes ``seq`` and ``at``."""
    event: EventKind = _decode_event(data)
    if event.seq == 0 and at is not None:
        event = msgspec.structs.replace(event, seq=seq, at=at)
    return event


def _step_started_parts() -> tuple[bytes, bytes]:
    """The bytes around step and attempt (big-endian int32s) of a StepStarted."""
    key = msgspec.msgpack.encode
    head = b"\x83" + key("kind") + key("step_started") + key("step") + b"\xd2"
    return head, key("attempt") + b"\xd2"


STEP_STARTED_PARTS = _step_started_parts()
"""``LEASE`` builds a StepStarted as ``head || int4(step) || middle || int4(attempt)``."""


def save_params(
    run: RunRecord, attributes: bytes, events: Sequence[tuple[int, str, bytes]], at: datetime
) -> tuple[object, ...]:
    """Parameters of ``SAVE_RUN`` storing ``run`` and appending ``events`` (seq, kind, data)."""
    closed: datetime | None = run.closed_at if run.status.is_closed else None
    return (
        run.status.value,
        run.started_at,
        closed,
        run.last_seq,
        attributes,
        run.result,
        None if run.error is None else encode(run.error),
        run.id,
        [seq for seq, _, _ in events],
        [kind for _, kind, _ in events],
        [data for _, _, data in events],
        at,
    )


def work_item_from_row(row: Record, expires: datetime) -> WorkItem:
    """A ``WorkItem`` leased until ``expires`` from a row of ``LEASE``."""
    return WorkItem(
        id=row["id"],
        run_id=row["run_id"],
        kind=row["kind"],
        name=row["name"],
        number=row["number"],
        attempt=row["attempt"],
        payload=row["payload"],
        token=row["token"],
        lease_expires_at=expires,
    )
