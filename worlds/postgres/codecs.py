"""Row <-> record codecs of the PostgreSQL world (msgpack ``bytea`` columns)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, get_args

import msgspec
from asyncpg import Record

from worlds._rules.claims import HeldClaim, decode_release_on
from worlds.types import (
    AttributeValue,
    Claim,
    ErrorInfo,
    EventKind,
    HookRecord,
    RunRecord,
    RunStatus,
    Slot,
    WorkItem,
)

encode = msgspec.msgpack.Encoder().encode
_decode_attributes = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_error = msgspec.msgpack.Decoder(ErrorInfo).decode
_decode_value = msgspec.msgpack.Decoder(Any).decode
_decode_event = msgspec.msgpack.Decoder(EventKind).decode
_STATUS = {status.value: status for status in RunStatus}

EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_value(data: bytes) -> AttributeValue:
    """An attribute value from its msgpack bytes."""
    value: AttributeValue = _decode_value(data)
    return value


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


def hook_from_row(row: Record) -> HookRecord:
    """A ``HookRecord`` from a row of ``LIST_HOOKS``."""
    return HookRecord(
        token=row["token"],
        run_id=row["run_id"],
        hook=row["hook"],
        attributes=_decode_attributes(row["attributes"]),
        created_at=row["created_at"],
    )


def run_from_row(row: Record) -> RunRecord:
    """A ``RunRecord`` from the ``RUN_COLUMNS`` of a row."""
    error = row["error"]
    return RunRecord(
        id=row["id"],
        workflow=row["workflow"],
        status=_STATUS[row["status"]],
        created_at=row["created_at"],
        started_at=row["started_at"],
        closed_at=row["closed_at"],
        last_seq=row["last_seq"],
        attributes=_decode_attributes(row["attributes"]),
        result=row["result"],
        error=None if error is None else _decode_error(error),
    )


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


def claim_from_row(row: Record, key: str, run_id: str | None = None) -> Claim:
    """A ``Claim`` on ``key`` from a row of ``GET_CLAIM`` or (with ``run_id``) ``RUN_CLAIMS``."""
    return Claim(
        key=key,
        value=decode_value(row["value"]),
        run_id=row["run_id"] if run_id is None else run_id,
        generation=row["generation"],
        step=row["step"],
        attempt=row["attempt"],
        ttl=row["ttl"],
        release_on=decode_release_on(row["release_on"]),
        lapses_at=row["lapses_at"],
        pruned_status=None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
    )


def held_from_row(row: Record) -> HeldClaim:
    """The ``HeldClaim`` a rule decides on, from a row of ``GET_CLAIM``."""
    return HeldClaim(
        row["run_id"],
        row["generation"],
        row["step"],
        row["lapses_at"],
        None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
    )


def slot_from_row(row: Record) -> Slot:
    """A ``Slot`` from a row of ``LIST_SLOTS`` / ``RUN_SLOTS``."""
    return Slot(
        key=row["key"],
        value=decode_value(row["value"]),
        run_id=row["run_id"],
        limit=row["lim"],
        holding=row["holding"],
        position=row["position"],
        hold=row["hold"],
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
