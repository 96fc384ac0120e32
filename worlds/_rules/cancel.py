"""What cancelling a run does: close it at once, or ask it to clean up first."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from worlds.types import (
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunStatus,
    StepDiscarded,
)

__all__ = ["CANCEL_DEADLINE_TIMER", "CancelPlan", "cancel_now", "discarded", "plan_cancel"]

CANCEL_DEADLINE_TIMER = 0
"""Timer number of a cancelling run's grace deadline: when due, the run closes
as cancelled even if its cleanup has not finished."""


class CancelPlan(NamedTuple):
    """What ``request_cancel`` does to a run.

    ``event`` is appended (``None``: nothing changes). For a ``RunCancelRequested``
    the world then drops the run's step and timer work, appends ``discarded``
    for each step in flight, wakes the workflow and schedules ``timer``.
    """

    event: RunCancelled | RunCancelRequested | None
    timer: NewWorkItem | None = None


def cancel_now(status: RunStatus, reason: str | None) -> RunCancelled | None:
    """The event ``cancel_run`` appends to a run in ``status`` (none once closed)."""
    return None if status.is_closed else RunCancelled(reason=reason)


def plan_cancel(
    status: RunStatus, workflow: str, reason: str | None, now: datetime, grace_seconds: float
) -> CancelPlan:
    """What ``request_cancel`` does: a pending run closes, a running one gets a deadline."""
    if status is RunStatus.PENDING:
        return CancelPlan(RunCancelled(reason=reason))
    if status is not RunStatus.RUNNING:
        return CancelPlan(None)
    deadline = now + timedelta(seconds=grace_seconds)
    timer = NewWorkItem(
        kind="timer", name=workflow, number=CANCEL_DEADLINE_TIMER, available_at=deadline
    )
    return CancelPlan(RunCancelRequested(reason=reason, deadline=deadline), timer)


def discarded(kind: str, number: int, attempt: int, in_flight: bool) -> StepDiscarded | None:
    """The event for a work item dropped by a cancel request: a leased step's discard."""
    if kind == "step" and in_flight:
        return StepDiscarded(step=number, attempt=attempt, outcome="cancelled")
    return None
