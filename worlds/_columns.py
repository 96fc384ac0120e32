"""Records from SQL rows, column by column, for both SQL worlds.

The SQLite and PostgreSQL schemas name their columns alike and store the same
msgpack blobs (attribute maps and values, errors, hook attributes); they differ
in how a time is stored (SQLite: integer microseconds; PostgreSQL:
``timestamptz``) and a flag (an integer or a boolean). ``Columns(time)`` turns
a row read by column name into the record it holds, given how its backend
reads a time column; ``claim_params`` is the one parameter list both backends'
claim statements take.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import msgspec

from worlds._flows.rows import (
    Beat,
    Candidate,
    ClaimRow,
    HeldClaim,
    KeyRow,
    LineEntry,
    QueuedWork,
)
from worlds.semantics import decode_release_on, encode_release_on
from worlds.types import (
    AttributeValue,
    Claim,
    ErrorInfo,
    HookRecord,
    KeyLimit,
    ReuseWindow,
    RunRecord,
    RunStatus,
    ScheduleRecord,
    Slot,
    SlotSample,
    WorkerInfo,
)

__all__ = [
    "Columns",
    "Row",
    "claim_params",
    "decode_attributes",
    "decode_value",
    "encode",
    "key_candidate",
    "key_limit",
    "key_line_entry",
    "key_row",
    "worker_params",
]


class Row(Protocol):
    """A row, read by column name (``sqlite3.Row``, ``asyncpg.Record``)."""

    def __getitem__(self, key: str, /) -> Any: ...


encode = msgspec.msgpack.Encoder().encode
"""The msgpack encoding of every blob column."""
_decode_attributes = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_error = msgspec.msgpack.Decoder(ErrorInfo).decode
_decode_value = msgspec.msgpack.Decoder(Any).decode
_decode_key_limit = msgspec.msgpack.Decoder(KeyLimit).decode


def decode_key_limit(data: bytes) -> KeyLimit:
    """The ``KeyLimit`` a ``key_limits.spec`` blob stores."""
    return _decode_key_limit(data)


_STATUS = {status.value: status for status in RunStatus}


def decode_value(data: bytes) -> AttributeValue:
    """An attribute value from its msgpack blob."""
    value: AttributeValue = _decode_value(data)
    return value


def decode_attributes(data: bytes) -> dict[str, AttributeValue]:
    """An attribute map from its msgpack blob."""
    attributes: dict[str, AttributeValue] = _decode_attributes(data)
    return attributes


def claim_params(claim: ClaimRow, generation: int | None = None) -> tuple[object, ...]:
    """Parameters of ``CLAIM_IF_FREE`` (no ``generation``) and of ``PUT_CLAIM``: key,
    index value, value, run id, [generation,] step, attempt, ttl, release_on."""
    head = (*claim.pair, encode(claim.value), claim.run_id)
    window = claim.window
    tail = (claim.step, claim.attempt, window.ttl, encode_release_on(window.release_on))
    return (*head, *tail) if generation is None else (*head, generation, *tail)


class Columns:
    """Reads records from rows whose time columns ``time`` reads."""

    def __init__(self, time: Callable[[Any], datetime]) -> None:
        self._time = time

    def _maybe(self, value: Any) -> datetime | None:
        return None if value is None else self._time(value)

    def run(self, row: Row) -> RunRecord:
        """A ``RunRecord`` from a row with the ``RUN_COLUMNS``."""
        time, error = self._time, row["error"]
        started, closed, admitted = row["started_at"], row["closed_at"], row["admitted_at"]
        return RunRecord(
            id=row["id"],
            workflow=row["workflow"],
            status=_STATUS[row["status"]],
            created_at=time(row["created_at"]),
            started_at=None if started is None else time(started),
            closed_at=None if closed is None else time(closed),
            last_seq=row["last_seq"],
            attributes=decode_attributes(row["attributes"]),
            result=row["result"],
            error=None if error is None else _decode_error(error),
            build_id=row["build_id"],
            pin=row["pin"],
            admitted_at=None if admitted is None else time(admitted),
        )

    def worker(self, row: Row) -> Beat:
        """A registered worker's ``Beat`` from a ``workers`` row."""
        time = self._time
        info = WorkerInfo(
            id=row["id"],
            host=row["host"],
            pid=row["pid"],
            build_id=row["build_id"],
            liveness_seconds=row["liveness"],
        )
        return Beat(
            info,
            time(row["started_at"]),
            time(row["last_beat"]),
            time(row["steady_since"]),
            row["in_flight"],
            fenced=bool(row["fenced"]),
            stopped=bool(row["stopped"]),
        )

    def hook(self, row: Row) -> HookRecord:
        """A ``HookRecord`` from a row with the hook columns."""
        return HookRecord(
            token=row["token"],
            run_id=row["run_id"],
            hook=row["hook"],
            attributes=decode_attributes(row["attributes"]),
            created_at=self._time(row["created_at"]),
        )

    def claim(self, row: Row) -> Claim:
        """A ``Claim`` from a row with the claim columns (``key`` and ``run_id`` among them)."""
        return Claim(
            key=row["key"],
            value=decode_value(row["value"]),
            run_id=row["run_id"],
            generation=row["generation"],
            step=row["step"],
            attempt=row["attempt"],
            ttl=row["ttl"],
            release_on=decode_release_on(row["release_on"]),
            lapses_at=self._maybe(row["lapses_at"]),
            pruned_status=None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
        )

    def held(self, row: Row) -> HeldClaim:
        """The ``HeldClaim`` a rule decides on, from a row with the claim columns."""
        return HeldClaim(
            row["run_id"],
            row["generation"],
            row["step"],
            self._maybe(row["lapses_at"]),
            None if row["pruned_status"] is None else RunStatus(row["pruned_status"]),
            ReuseWindow(ttl=row["ttl"], release_on=decode_release_on(row["release_on"])),
        )

    def slot(self, row: Row) -> Slot:
        """A ``Slot`` from a row of ``LIST_SLOTS`` / ``RUN_SLOTS``."""
        return Slot(
            key=row["key"],
            value=decode_value(row["value"]),
            run_id=row["run_id"],
            limit=row["lim"],
            holding=bool(row["holding"]),
            position=row["position"],
            hold=row["hold"],
            priority=row["priority"],
            burst=row["burst"],
        )

    def slot_sample(self, key: str, row: Row) -> SlotSample:
        """A row of ``SLOT_HISTORY`` (``World.slot_history``) of limited key ``key``."""
        return SlotSample(
            key=key,
            ivalue=row["ivalue"],
            minute=self._time(row["minute"]),
            holders=row["holders"],
            waiters=row["waiters"],
            peak_holders=row["peak_holders"],
            peak_waiters=row["peak_waiters"],
        )

    def queued(self, row: Row) -> QueuedWork:
        """A ``QueuedWork`` from a row of the work item a flow merges into."""
        return QueuedWork(
            name=row["name"],
            number=row["number"],
            attempt=row["attempt"],
            payload=row["payload"],
            available_at=self._time(row["available_at"]),
            owner=row["owner"],
            expires_at=self._maybe(row["expires_at"]),
            ever_leased=bool(row["ever_leased"]),
        )

    def schedule(self, row: Row) -> ScheduleRecord:
        """A ``ScheduleRecord`` from a row with the ``SCHEDULE_COLUMNS``."""
        return ScheduleRecord(
            id=row["id"],
            workflow=row["workflow"],
            spec=bytes(row["spec"]),
            paused=bool(row["paused"]),
            note=row["note"],
            next_fire_at=self._maybe(row["next_fire_at"]),
            buffered_at=self._maybe(row["buffered_at"]),
            wake_at=self._maybe(row["wake_at"]),
            version=row["version"],
            created_at=self._time(row["created_at"]),
            updated_at=self._time(row["updated_at"]),
        )


def worker_params(worker: Beat, time: Callable[[datetime], Any]) -> tuple[object, ...]:
    """The parameters of both backends' ``PUT_WORKER`` that store ``worker``, its times
    as ``time`` stores them."""
    info = worker.info
    times = (time(worker.started_at), time(worker.last_beat), time(worker.steady_since))
    identity = (info.id, info.host, info.pid, info.build_id, info.liveness_seconds)
    return (*identity, *times, worker.in_flight, worker.fenced, worker.stopped)


def key_row(row: Row) -> KeyRow:
    """A ``KeyRow`` from a row of ``KEY_ROW`` (``spec``: the stored ``KeyLimit``)."""
    return KeyRow(_decode_key_limit(row["spec"]), row["vtime"], row["holding"], row["holder"])


def key_limit(row: Row) -> KeyLimit:
    """The ``KeyLimit`` a ``KEY_ROW`` row stores, with ``held`` from its ``holding``."""
    return msgspec.structs.replace(_decode_key_limit(row["spec"]), held=row["holding"])


def key_line_entry(row: Row) -> LineEntry:
    """A ``LineEntry`` from a ``KEY_LINE`` row: the value, its pass and, unless its
    ``run_id`` is NULL (nobody in line at its pair), its ``Candidate``."""
    share = float(row["share"])
    if row["run_id"] is None:
        return LineEntry(row["ivalue"], share, None)
    return LineEntry(row["ivalue"], share, key_candidate(row, row["ivalue"]))


def key_candidate(row: Row, ivalue: str) -> Candidate:
    """A ``Candidate`` of value ``ivalue`` from a row of the first waiter of its pair
    (``run_id``, ``hold``, ``lim``, ``burst``, ``priority``, ``position``), the slots
    held there (``holding``) and the value's ``share``."""
    return Candidate(
        ivalue,
        (row["run_id"], row["hold"]),
        row["lim"],
        row["burst"],
        row["holding"],
        row["priority"],
        row["position"],
        float(row["share"]),
    )
