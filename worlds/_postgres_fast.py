"""One-round-trip commits of the PostgreSQL world (private to ``worlds.postgres``).

Most commits (a workflow task's events and steps, a step's result, a timer) set
no claim, hook or run attribute and do not continue as new. Those go to the
``commit_run`` function of the schema in one call: it locks the run, checks
the lease, appends the events, acks and enqueues, all as the general path would.
``commit_params`` says whether a request qualifies and builds the call;
``commit_result`` turns the rows back into a ``CommitResult``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import msgspec

from worlds import _postgres_schema as sql
from worlds._postgres_tx import new_token
from worlds.semantics import apply_to_run, lease_deadline, work_item_id
from worlds.types import (
    EPOCH,
    AttributeSet,
    CommitRequest,
    CommitResult,
    EventKind,
    HookCreated,
    RunContinued,
    RunRecord,
    RunStatus,
    StepStarted,
    WorkItem,
)

__all__ = ["commit_params", "commit_result"]

_TEMPLATE = RunRecord(id="", workflow="", status=RunStatus.PENDING, created_at=EPOCH)


def _qualifies(event: EventKind) -> bool:
    if isinstance(event, AttributeSet):
        return event.step is not None and not event.unique
    return not isinstance(event, (HookCreated, RunContinued))


def _unstamped(event: EventKind) -> EventKind:
    if event.seq == 0 and event.at == EPOCH:
        return event
    return msgspec.structs.replace(event, seq=0, at=EPOCH)


def commit_params(
    request: CommitRequest, now: datetime, channel: str, run_channel: str
) -> tuple[Any, ...] | None:
    """The arguments of ``COMMIT_RUN`` for ``request``, or ``None`` if it needs the
    general path (claims, hooks, run attributes, continue-as-new)."""
    if not all(_qualifies(event) for event in request.events):
        return None
    state = _TEMPLATE
    for event in request.events:
        state = apply_to_run(state, msgspec.structs.replace(event, at=now))
    lease = request.lease
    schedule = request.schedule
    tokens = [new_token() for _ in schedule]
    return (
        request.run_id,
        request.worker_id,
        None if lease is None else lease.id,
        None if lease is None else lease.token,
        request.ack,
        now,
        [sql.EVENT_TAGS[type(event)] for event in request.events],
        [sql.encode(_unstamped(event)) for event in request.events],
        None if state.status is RunStatus.PENDING else state.status.value,
        state.started_at,
        state.closed_at if state.status.is_closed else None,
        state.result,
        None if state.error is None else sql.encode(state.error),
        [work_item_id(request.run_id, new) for new in schedule],
        [new.kind for new in schedule],
        [new.name for new in schedule],
        [new.number for new in schedule],
        [new.attempt for new in schedule],
        [new.payload for new in schedule],
        [new.available_at for new in schedule],  # None: due at the server's now
        [new.lease for new in schedule],
        tokens,
        lease_deadline(now, request.lease_seconds),
        [
            sql.encode(StepStarted(step=new.number, attempt=new.attempt))
            if new.kind == "step"
            else b""
            for new in schedule
        ],
        channel,
        run_channel,
    )


def commit_result(
    request: CommitRequest, rows: Sequence[Any], params: tuple[Any, ...]
) -> CommitResult | None:
    """The result of a ``COMMIT_RUN`` call; ``None`` when the run was closed or the
    lease lost and ``request.discard`` must be appended by the general path."""
    outcome, status, base, at, _ = rows[-1]
    if outcome == "missing":
        raise LookupError(f"unknown run {request.run_id}")
    if outcome == "closed":
        if request.discard is not None:
            return None
        return CommitResult(ok=False, status=RunStatus(status))
    if outcome == "lost":
        if request.discard is not None:
            return None  # the general path records the refused result
        return CommitResult(ok=False, status=RunStatus(status), lease_lost=True)
    events = tuple(
        msgspec.structs.replace(event, seq=base + n, at=at)
        for n, event in enumerate(request.events, start=1)
    )
    ids, tokens, expires = params[13], params[21], params[22]
    leased = []
    for _, _, index, _, name in rows[:-1]:
        new = request.schedule[index - 1]
        leased.append(
            WorkItem(
                id=ids[index - 1],
                run_id=request.run_id,
                kind=new.kind,
                name=name,
                number=new.number,
                attempt=new.attempt,
                payload=new.payload,
                token=tokens[index - 1],
                lease_expires_at=expires,
            )
        )
    return CommitResult(ok=True, status=RunStatus(status), events=events, leased=tuple(leased))
