"""Row <-> record codecs of the SQLite world.

Times are stored as integer microseconds since the Unix epoch, so comparisons in
SQL are exact. Events, attribute maps and claim values are msgpack blobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast, get_args

import msgspec

from worlds.types import (
    EPOCH,
    AttributeValue,
    ErrorInfo,
    EventKind,
    RunRecord,
    RunStatus,
    WorkItem,
)

_MICROSECOND = timedelta(microseconds=1)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (moment - EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=micros)


encode = msgspec.msgpack.Encoder().encode
_decode_attributes = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_error = msgspec.msgpack.Decoder(ErrorInfo).decode
_decode_value = msgspec.msgpack.Decoder(Any).decode

_STATUS = {status.value: status for status in RunStatus}


def decode_value(data: bytes) -> AttributeValue:
    """An attribute value from its msgpack blob."""
    value: AttributeValue = _decode_value(data)
    return value


def decode_attributes(data: bytes) -> dict[str, AttributeValue]:
    """An attribute map from its msgpack blob."""
    attributes: dict[str, AttributeValue] = _decode_attributes(data)
    return attributes


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A ``RunRecord`` from the ``RUN_COLUMNS`` of a row."""
    started, closed, error = row[4], row[5], row[9]
    return RunRecord(
        id=row[0],
        workflow=row[1],
        status=_STATUS[row[2]],
        created_at=from_micros(row[3]),
        started_at=None if started is None else from_micros(started),
        closed_at=None if closed is None else from_micros(closed),
        last_seq=row[6],
        attributes=decode_attributes(row[7]),
        result=row[8],
        error=None if error is None else _decode_error(error),
    )


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


_EVENT_DECODER = msgspec.msgpack.Decoder(EventKind)

EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_event(data: bytes) -> EventKind:
    """An event from its msgpack blob."""
    event: EventKind = _EVENT_DECODER.decode(data)
    return event


def leased(
    run_id: str, item_id: str, row: tuple[str, str, int, int, bytes], token: int, expires: int
) -> WorkItem:
    """The ``WorkItem`` a worker holds once it leased item ``item_id`` of run ``run_id``."""
    kind, name, number, attempt, payload = row
    return WorkItem(
        id=item_id,
        run_id=run_id,
        kind=cast(Any, kind),
        name=name,
        number=number,
        attempt=attempt,
        payload=payload,
        token=token,
        lease_expires_at=from_micros(expires),
    )
