"""One-round-trip commits of the PostgreSQL world (private to ``worlds.postgres``).

Most commits (a workflow task's events and steps, a step's result, a timer) set
no claim, hook or run attribute and do not close the run. Those go to the
``commit_run`` function of the schema in one call: it locks the run, checks
the lease, appends the events, acks and enqueues, all as the general path would.
``commit_params`` says whether a request qualifies and builds the call;
``commit_result`` turns the rows back into a ``CommitResult``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import msgspec
from asyncpg import Record

from worlds.postgres import codecs
from worlds.postgres.transactions import new_token
from worlds.semantics import CLOSING_EVENTS, apply_to_run, lease_deadline, work_item_id
from worlds.types import (
    EPOCH,
    AttributeSet,
    CommitRequest,
    CommitResult,
    EventKind,
    HookCreated,
    RunRecord,
    RunStatus,
    SlotReleased,
    SlotRequested,
    StepStarted,
    StreamWritten,
    WorkItem,
)

__all__ = ["CommitRunArgs", "commit_params", "commit_result"]

_TEMPLATE = RunRecord(id="", workflow="", status=RunStatus.PENDING, created_at=EPOCH)


class CommitRunArgs(NamedTuple):
    """The arguments of ``commit_run``, in its parameter order (``p_<field>``)."""

    run: str
    worker: str
    lease: str | None
    token: int | None
    ack: bool
    now: datetime
    kinds: list[str]
    data: list[bytes]
    status: str | None
    started: datetime | None
    closed: datetime | None
    result: bytes | None
    error: bytes | None
    ids: list[str]
    wkinds: list[str]
    names: list[str]
    numbers: list[int]
    attempts: list[int]
    payloads: list[bytes]
    available: list[datetime | None]
    lease_asked: list[bool]
    tokens: list[int]
    expires: datetime
    starts: list[bytes]
    channel: str | None
    run_channel: str | None


def _qualifies(event: EventKind) -> bool:
    if isinstance(event, AttributeSet):
        return event.step is not None and not event.unique
    # closing a run may tell its parent or cancel its children (worlds._rules.children)
    # a hold's slot is settled (and released, promoting) by the general path
    slot = (SlotRequested, SlotReleased)
    return not isinstance(event, (HookCreated, StreamWritten, *slot, *CLOSING_EVENTS))


def _unstamped(event: EventKind) -> EventKind:
    if event.seq == 0 and event.at == EPOCH:
        return event
    return msgspec.structs.replace(event, seq=0, at=EPOCH)


def commit_params(
    request: CommitRequest, now: datetime, channel: str, run_channel: str
) -> CommitRunArgs | None:
    """The arguments of ``COMMIT_RUN`` for ``request``, or ``None`` if it needs the
    general path (claims, hooks, run attributes, closing the run)."""
    if not all(_qualifies(event) for event in request.events):
        return None
    state = _TEMPLATE
    for event in request.events:
        state = apply_to_run(state, msgspec.structs.replace(event, at=now))
    lease = request.lease
    schedule = request.schedule
    tokens = [new_token() for _ in schedule]
    return CommitRunArgs(
        run=request.run_id,
        worker=request.worker_id,
        lease=None if lease is None else lease.id,
        token=None if lease is None else lease.token,
        ack=request.ack,
        now=now,
        kinds=[codecs.EVENT_TAGS[type(event)] for event in request.events],
        data=[codecs.encode(_unstamped(event)) for event in request.events],
        status=None if state.status is RunStatus.PENDING else state.status.value,
        started=state.started_at,
        closed=state.closed_at if state.status.is_closed else None,
        result=state.result,
        error=None if state.error is None else codecs.encode(state.error),
        ids=[work_item_id(request.run_id, new) for new in schedule],
        wkinds=[new.kind for new in schedule],
        names=[new.name for new in schedule],
        numbers=[new.number for new in schedule],
        attempts=[new.attempt for new in schedule],
        payloads=[new.payload for new in schedule],
        available=[new.available_at for new in schedule],  # None: due at the server's now
        lease_asked=[new.lease for new in schedule],
        tokens=tokens,
        expires=lease_deadline(now, request.lease_seconds),
        starts=[
            codecs.encode(StepStarted(step=new.number, attempt=new.attempt))
            if new.kind == "step"
            else b""
            for new in schedule
        ],
        channel=channel,
        run_channel=run_channel,
    )


def commit_result(
    request: CommitRequest, rows: Sequence[Record], args: CommitRunArgs
) -> CommitResult | None:
    """The result of a ``COMMIT_RUN`` call; ``None`` when the general path must
    answer: the lease was lost (it names the holder), or the run was closed and
    ``request.discard`` must be appended."""
    last = rows[-1]
    outcome, status, base, at = last["outcome"], last["status"], last["last_seq"], last["at"]
    if outcome == "missing":
        raise LookupError(f"unknown run {request.run_id}")
    if outcome == "closed":
        if request.discard is not None:
            return None
        return CommitResult(ok=False, status=RunStatus(status))
    if outcome == "lost":
        return None  # rare: the general path names the holder and records a discard
    if outcome == "slots":
        return None  # the run holds or waits for slots: the general path promotes
    events = tuple(
        msgspec.structs.replace(event, seq=base + n, at=at)
        for n, event in enumerate(request.events, start=1)
    )
    leased = []
    for row in rows[:-1]:
        index = row["last_seq"] - 1  # a leased row's last_seq is the item's 1-based index
        new = request.schedule[index]
        leased.append(
            WorkItem(
                id=args.ids[index],
                run_id=request.run_id,
                kind=new.kind,
                name=row["name"],
                number=new.number,
                attempt=new.attempt,
                payload=new.payload,
                token=args.tokens[index],
                lease_expires_at=args.expires,
            )
        )
    return CommitResult(ok=True, status=RunStatus(status), events=events, leased=tuple(leased))
