"""The portable rows of a world's full dump, in the one order they are written and read.

A world's whole state, apart from leases and registered workers, is a stream
of these rows (``World.export_rows``); ``World.import_rows`` writes them into
another world, of any backend. They are the storage's own records, not the
SDK's: payloads, results and attribute blobs are the bytes the world stored
(a ``CodecWorld``'s encoded bytes stay encoded), so a dump moved between
worlds keeps every byte. ``ROW_ORDER`` is the order a dump lists its kinds in
(a run before the rows that name it), and ``encode_rows``/``decode_rows`` the
exact binary form (msgpack) archives carry.

``ArchivedRun`` is one line of ``wf runs export``: a run's record, attributes,
claims and log in readable JSON, with its exact rows beside them for import
and replay (JSON cannot tell a ``datetime`` attribute from a string, msgpack
can).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import TypeAlias

import msgspec

from worlds.types import (
    Claim,
    EventKind,
    HookRecord,
    KeyLimit,
    Pin,
    RunRecord,
    ScheduleRecord,
    Slot,
    StoredValue,
    WorkKind,
)

__all__ = [
    "ARCHIVE_FORMAT",
    "ROW_ORDER",
    "ArchivedRun",
    "DumpRow",
    "DumpedChunk",
    "DumpedClaim",
    "DumpedDeployment",
    "DumpedHook",
    "DumpedKeyLimit",
    "DumpedKeyShare",
    "DumpedRelease",
    "DumpedResume",
    "DumpedRun",
    "DumpedSchedule",
    "DumpedSetting",
    "DumpedSlot",
    "DumpedToken",
    "DumpedUpdate",
    "DumpedWork",
    "archive_run",
    "decode_archived",
    "decode_rows",
    "encode_archived",
    "encode_rows",
    "row_run_id",
]

ARCHIVE_FORMAT = 2
"""The version of ``ArchivedRun`` lines this runtime writes and reads (2: a run's
rows may hold ``DumpedUpdate`` rows, which a format-1 reader cannot decode)."""


class DumpedSetting(msgspec.Struct, frozen=True, tag="setting"):
    """A world setting (``World.setting``)."""

    key: str
    value: str


class DumpedRun(msgspec.Struct, frozen=True, tag="run"):
    """A run's record and its whole log, in order."""

    record: RunRecord
    events: list[EventKind]


class DumpedClaim(msgspec.Struct, frozen=True, tag="claim"):
    """A unique pair's claim: held by a run or one of its steps, or a tombstone."""

    claim: Claim


class DumpedRelease(msgspec.Struct, frozen=True, tag="released"):
    """A released pair: free, keeping its generation (the next claim's is higher).
    ``ivalue`` is its index term; ``value`` the last value stored with it, where the
    world keeps one (nothing reads it until the pair is claimed again)."""

    key: str
    ivalue: str
    generation: int
    value: StoredValue = None


class DumpedSlot(msgspec.Struct, frozen=True, tag="slot"):
    """A limited pair's holder or waiter."""

    slot: Slot


class DumpedToken(msgspec.Struct, frozen=True, tag="rate_token"):
    """A token a rate-limited pair handed out (``ivalue``: the pair's index term)."""

    key: str
    ivalue: str
    at: datetime
    run_id: str
    number: int
    limit: int
    per: float
    priority: int = 0


class DumpedHook(msgspec.Struct, frozen=True, tag="hook"):
    """A live hook and the token it holds."""

    hook: HookRecord


class DumpedResume(msgspec.Struct, frozen=True, tag="hook_resume"):
    """A hook delivery remembered by its resume id (exactly once per id)."""

    token: str
    resume_id: str
    run_id: str


class DumpedUpdate(msgspec.Struct, frozen=True, tag="update"):
    """An update id a run accepted, with the ``seq`` of its ``UpdateReceived``: the
    same id sent again after a move answers the one recorded outcome (RFC 0021)."""

    run_id: str
    update_id: str
    seq: int


class DumpedWork(msgspec.Struct, frozen=True, tag="work"):
    """A queued work item, without its lease: a leased item is due at once where
    it is loaded, as if its lease had run out."""

    run_id: str
    id: str
    kind: WorkKind
    name: str
    number: int
    attempt: int
    payload: bytes
    available_at: datetime
    rewake: bool = False
    ever_leased: bool = False


class DumpedChunk(msgspec.Struct, frozen=True, tag="stream"):
    """One chunk of a run's stream."""

    run_id: str
    name: str
    seq: int
    data: bytes
    at: datetime


class DumpedSchedule(msgspec.Struct, frozen=True, tag="schedule"):
    """A schedule, without its lease."""

    schedule: ScheduleRecord


class DumpedKeyLimit(msgspec.Struct, frozen=True, tag="key_limit"):
    """A key's limit over all its values, with its weights (``held`` is 0: what is
    held is the slots' business), and ``vtime``, the pass of the value served last
    (the weighted round-robin carries on where it was)."""

    limit: KeyLimit
    vtime: float


class DumpedKeyShare(msgspec.Struct, frozen=True, tag="key_share"):
    """A limited key's value's pass in the weighted round-robin (``ivalue``: the
    value's index term) and whether it waits in the key's line."""

    key: str
    ivalue: str
    share: float
    queued: bool = False
    """Whether the value waits in its key's line (absent from archives written before
    the line was indexed: an importing world then finds no value waiting)."""


class DumpedDeployment(msgspec.Struct, frozen=True, tag="deployment"):
    """A workflow a build's workers registered, with its pin, and when the build was
    first registered (RFC 0025): a moved run stays on its build."""

    build_id: str
    workflow: str
    pin: Pin
    registered_at: datetime


DumpRow: TypeAlias = (
    DumpedSetting
    | DumpedRun
    | DumpedClaim
    | DumpedRelease
    | DumpedSlot
    | DumpedToken
    | DumpedHook
    | DumpedResume
    | DumpedUpdate
    | DumpedWork
    | DumpedChunk
    | DumpedSchedule
    | DumpedKeyLimit
    | DumpedKeyShare
    | DumpedDeployment
)
"""Any row of a dump."""

ROW_ORDER: tuple[type[DumpRow], ...] = (
    DumpedSetting,
    DumpedRun,
    DumpedClaim,
    DumpedRelease,
    DumpedSlot,
    DumpedToken,
    DumpedHook,
    DumpedResume,
    DumpedUpdate,
    DumpedWork,
    DumpedChunk,
    DumpedSchedule,
    DumpedKeyLimit,
    DumpedKeyShare,
    DumpedDeployment,
)
"""The order of the kinds in a dump, and in which ``import_rows`` writes a batch:
settings first (a codec world's bytes need its codec), then each run before the
rows that name it, then the world's own rows (schedules, key limits and their
shares, deployments)."""

_rows_encoder = msgspec.msgpack.Encoder()
_rows_decoder = msgspec.msgpack.Decoder(list[DumpRow])


def encode_rows(rows: list[DumpRow]) -> bytes:
    """The exact binary form (msgpack) of ``rows``."""
    return _rows_encoder.encode(rows)


def decode_rows(data: bytes) -> list[DumpRow]:
    """The rows ``encode_rows`` wrote; ``ValueError`` for anything else."""
    try:
        return _rows_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a dump of world rows: {exc}") from None


def row_run_id(row: DumpRow) -> str | None:
    """The run a row belongs to; ``None`` for the world's own rows (settings,
    schedules, released pairs, tombstones of pruned runs, key limits and shares,
    deployments)."""
    match row:
        case DumpedRun(record=record):
            return record.id
        case DumpedClaim(claim=claim):
            return None if claim.pruned_status is not None else claim.run_id
        case DumpedSlot(slot=slot):
            return slot.run_id
        case DumpedHook(hook=hook):
            return hook.run_id
        case DumpedToken() | DumpedResume() | DumpedUpdate() | DumpedWork() | DumpedChunk():
            return row.run_id
        case (
            DumpedSetting()
            | DumpedRelease()
            | DumpedSchedule()
            | DumpedKeyLimit()
            | DumpedKeyShare()
            | DumpedDeployment()
        ):
            return None


class ArchivedRun(msgspec.Struct, frozen=True, kw_only=True):
    """One exported run: readable fields, and ``rows``, its exact rows (base64 of
    ``encode_rows``) that import and replay use."""

    format: int
    id: str
    workflow: str
    status: str
    record: RunRecord
    attributes: dict[str, StoredValue]
    claims: list[Claim]
    events: list[EventKind]
    rows: str

    def dump(self) -> list[DumpRow]:
        """The run's exact rows: its ``DumpedRun`` first.

        Raises:
            ValueError: the rows are not a dump of this one run.
        """
        try:
            data = base64.b64decode(self.rows, validate=True)
        except ValueError as exc:
            raise ValueError(f"run {self.id}: its rows are not base64: {exc}") from None
        rows = decode_rows(data)
        if not rows or not isinstance(rows[0], DumpedRun) or rows[0].record.id != self.id:
            raise ValueError(f"run {self.id}: its rows do not start with the run")
        if any(row_run_id(row) != self.id for row in rows):
            raise ValueError(f"run {self.id}: its rows name another run")
        return rows


def archive_run(rows: list[DumpRow]) -> ArchivedRun:
    """The ``ArchivedRun`` of one run's rows (its ``DumpedRun`` first)."""
    head = rows[0]
    if not isinstance(head, DumpedRun):
        raise ValueError("a run's rows start with its DumpedRun")
    record = head.record
    claims = [row.claim for row in rows if isinstance(row, DumpedClaim)]
    return ArchivedRun(
        format=ARCHIVE_FORMAT,
        id=record.id,
        workflow=record.workflow,
        status=record.status.value,
        record=record,
        attributes=dict(record.attributes),
        claims=claims,
        events=list(head.events),
        rows=base64.b64encode(encode_rows(rows)).decode("ascii"),
    )


_archived_encoder = msgspec.json.Encoder()
_archived_decoder = msgspec.json.Decoder(ArchivedRun)


def encode_archived(run: ArchivedRun) -> bytes:
    """One JSON line (no newline) of ``run``."""
    return _archived_encoder.encode(run)


def decode_archived(line: bytes | str) -> ArchivedRun:
    """The ``ArchivedRun`` of one exported line.

    Raises:
        ValueError: the line is not an exported run, or of a newer format.
    """
    try:
        run = _archived_decoder.decode(line)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not an exported run: {exc}") from None
    if run.format > ARCHIVE_FORMAT:
        raise ValueError(
            f"run {run.id} was exported in format {run.format}; this runtime reads up to "
            f"{ARCHIVE_FORMAT}: upgrade the runtime"
        )
    return run
