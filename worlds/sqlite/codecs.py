"""Row <-> record codecs of the SQLite world.

Times are stored as integer microseconds since the Unix epoch, so comparisons in
SQL are exact. Events, attribute maps and claim values are msgpack blobs.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from typing import Any, cast, get_args

import msgspec

from worlds._rules.claims import HeldClaim, decode_release_on
from worlds._rules.work import Placement
from worlds.types import (
    EPOCH,
    AttributeValue,
    Claim,
    ErrorInfo,
    EventKind,
    HookRecord,
    NewWorkItem,
    RunRecord,
    RunStatus,
    Slot,
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


def run_from_row(row: sqlite3.Row) -> RunRecord:
    """A ``RunRecord`` from a row with the ``RUN_COLUMNS``."""
    started, closed, error = row["started_at"], row["closed_at"], row["error"]
    return RunRecord(
        id=row["id"],
        workflow=row["workflow"],
        status=_STATUS[row["status"]],
        created_at=from_micros(row["created_at"]),
        started_at=None if started is None else from_micros(started),
        closed_at=None if closed is None else from_micros(closed),
        last_seq=row["last_seq"],
        attributes=decode_attributes(row["attributes"]),
        result=row["result"],
        error=None if error is None else _decode_error(error),
    )


def hook_from_row(row: sqlite3.Row) -> HookRecord:
    """A ``HookRecord`` from a row with the ``HOOK_COLUMNS``."""
    return HookRecord(
        token=row["token"],
        run_id=row["run_id"],
        hook=row["hook"],
        attributes=decode_attributes(row["attributes"]),
        created_at=from_micros(row["created_at"]),
    )


def claim_from_row(row: sqlite3.Row) -> Claim:
    """A ``Claim`` from a row with the ``CLAIM_COLUMNS`` of a held claim."""
    return Claim(
        key=row["key"],
        value=decode_value(row["value"]),
        run_id=row["run_id"],
        generation=row["generation"],
        step=row["step"],
        attempt=row["attempt"],
        ttl=row["ttl"],
        release_on=decode_release_on(row["release_on"]),
        lapses_at=None if row["lapses_at"] is None else from_micros(row["lapses_at"]),
        pruned_status=None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
    )


def held_from_row(row: sqlite3.Row) -> HeldClaim:
    """The ``HeldClaim`` a rule decides on, from a row with the ``CLAIM_COLUMNS``."""
    return HeldClaim(
        row["run_id"],
        row["generation"],
        row["step"],
        None if row["lapses_at"] is None else from_micros(row["lapses_at"]),
        None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
    )


def slot_from_row(row: sqlite3.Row) -> Slot:
    """A ``Slot`` from a row of ``LIST_SLOTS`` / ``RUN_SLOTS``."""
    return Slot(
        key=row["key"],
        value=decode_value(row["value"]),
        run_id=row["run_id"],
        limit=row["lim"],
        holding=bool(row["holding"]),
        position=row["position"],
        hold=row["hold"],
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


_EVENT_DECODER = msgspec.msgpack.Decoder(EventKind)

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
