"""A run's record: how a new run starts and how each event changes it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import msgspec

from worlds.types import (
    AttributeSet,
    AttributeValue,
    CommitRequest,
    CreateRunRequest,
    EventKind,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunRecord,
    RunReopened,
    RunStarted,
    RunStatus,
)

__all__ = [
    "CLOSING_EVENTS",
    "RUN_DEADLINE_TIMER",
    "apply_to_run",
    "created_event",
    "deadline_item",
    "first_task_commit",
    "new_run",
    "stamped",
]

RUN_DEADLINE_TIMER = -1
"""Timer number of a run's timeout (``CreateRunRequest.timeout_at``): when due,
the run fails with ``TimeoutError``."""

CLOSING_EVENTS = (RunCompleted, RunFailed, RunCancelled, RunContinued)
"""The events that close a run (``apply_to_run`` gives each its closed status)."""


def apply_to_run(run: RunRecord, event: EventKind) -> RunRecord:
    """The run record after ``event`` (with its ``seq`` and ``at``) is appended.

    Status and times follow the run's lifecycle events; a run-level
    ``AttributeSet`` (no ``step``) changes the run's attributes.
    """
    changes: dict[str, object] = {"last_seq": event.seq}
    if isinstance(event, RunStarted):
        changes.update(status=RunStatus.RUNNING, started_at=event.at)
    elif isinstance(event, RunCompleted):
        changes.update(status=RunStatus.COMPLETED, closed_at=event.at, result=event.result)
    elif isinstance(event, RunFailed):
        changes.update(status=RunStatus.FAILED, closed_at=event.at, error=event.error)
    elif isinstance(event, RunCancelled):
        changes.update(status=RunStatus.CANCELLED, closed_at=event.at)
    elif isinstance(event, RunContinued):
        changes.update(status=RunStatus.CONTINUED, closed_at=event.at)
    elif isinstance(event, RunCancelRequested):
        changes.update(status=RunStatus.CANCELLING)
    elif isinstance(event, RunReopened):
        changes.update(status=RunStatus.RUNNING, closed_at=None, result=None, error=None)
    elif isinstance(event, AttributeSet) and event.step is None:
        changes.update(attributes={**run.attributes, event.key: event.value})
    return msgspec.structs.replace(run, **changes)


def stamped(run: RunRecord, event: EventKind, now: datetime) -> tuple[RunRecord, EventKind]:
    """``event`` numbered and dated as the next of ``run``, and the run after it.

    A rate-limited run's ``RunStarted`` is dated at its admission (``admitted_at``),
    not when a worker got to it: its tokens bound every window of those times, so
    the recorded starts of a pair never exceed its rate, however late workers were.
    """
    at = now
    if isinstance(event, RunStarted) and run.admitted_at is not None:
        at = run.admitted_at
    stored = msgspec.structs.replace(event, seq=run.last_seq + 1, at=at)
    return apply_to_run(run, stored), stored


def new_run(
    run_id: str,
    workflow: str,
    attributes: dict[str, AttributeValue],
    now: datetime,
    admitted_at: datetime | None = None,
) -> RunRecord:
    """A new run's record once its ``RunCreated`` (seq 1) is stored: pending.

    ``admitted_at``: a rate-limited run's token time, when it is admitted."""
    return RunRecord(
        id=run_id,
        workflow=workflow,
        status=RunStatus.PENDING,
        created_at=now,
        attributes=dict(attributes),
        last_seq=1,
        admitted_at=admitted_at,
    )


def created_event(
    workflow: str,
    args: bytes,
    attributes: dict[str, AttributeValue],
    now: datetime,
    limits: Mapping[str, int] | None = None,
    *,
    start_at: datetime | None = None,
    debounced: bool = False,
    priority: int = 0,
    rate_limited: tuple[str, ...] = (),
    rates: Mapping[str, tuple[int, float]] | None = None,
) -> RunCreated:
    """A new run's first event, ``RunCreated`` stored as seq 1 at ``now``.

    ``limits`` is the limit of each limited start attribute; ``start_at`` and
    ``debounced`` say when a run made to wait starts, and why.
    """
    created = RunCreated(
        workflow=workflow,
        args=args,
        attributes=dict(attributes),
        limits=dict(limits or {}),
        start_at=start_at,
        debounced=debounced,
        priority=priority,
        rate_limited=rate_limited,
        rates=dict(rates or {}),
    )
    return msgspec.structs.replace(created, seq=1, at=now)


def deadline_item(request: CreateRunRequest) -> NewWorkItem | None:
    """The timer that fails a new run at ``request.timeout_at``, if it has one."""
    if request.timeout_at is None:
        return None
    return NewWorkItem(
        kind="timer",
        name=request.workflow,
        number=RUN_DEADLINE_TIMER,
        available_at=request.timeout_at,
    )


def runs_ahead(request: CreateRunRequest) -> bool:
    """Whether the new run may be leased to ``request.lease_to`` (and its first
    task applied) as it is created: not when it must wait for a slot, a start
    time, a debounce or a rate limit's token."""
    waits = bool(request.limits) or request.start_at is not None or request.debounce is not None
    waits = waits or bool(request.rates)
    return request.lease_to is not None and not waits


def first_task_commit(request: CreateRunRequest) -> CommitRequest | None:
    """The commit that applies ``request.first`` (a new run's first workflow task)
    right after the run is created, in the same transaction; None without one,
    or when the run may not run ahead (``runs_ahead``)."""
    if request.first is None or request.lease_to is None or not runs_ahead(request):
        return None
    return CommitRequest(
        run_id=request.run_id,
        worker_id=request.lease_to,
        events=request.first.events,
        schedule=request.first.schedule,
        lease_seconds=request.lease_seconds,
        at=request.first.at,
    )
