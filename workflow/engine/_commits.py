"""The commits a worker makes that are not a workflow task's or a step body's own:
a due timer, a step past its attempts, and the failures that end a poison loop."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from workflow import _observe
from workflow._codec import decode_headers, error_info
from workflow.engine._faults import POISON_LIMIT
from workflow.engine._instance import WorkflowInstance
from worlds.protocol import World
from worlds.semantics import CANCEL_DEADLINE_TIMER, RUN_DEADLINE_TIMER
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    EventKind,
    NewWorkItem,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunStatus,
    StepCompleted,
    StepFailed,
    StepRetrying,
    WaitCompleted,
    WorkItem,
)

__all__ = [
    "closed_report",
    "closing_event",
    "describe_work",
    "exhausted_commit",
    "is_outcome_of",
    "poisoned_run_commit",
    "poisoned_step_commit",
    "report_closed_by_timer",
    "timer_commit",
]


def describe_work(item: WorkItem) -> str:
    """``item`` in words, for a log line."""
    if item.kind == "step":
        return f"step {item.name!r} #{item.number} attempt {item.attempt} of run {item.run_id}"
    return f"the {item.kind} task of run {item.run_id}"


def is_outcome_of(event: EventKind, item: WorkItem) -> bool:
    """Whether ``event`` records the outcome of step attempt ``item``."""
    return (
        isinstance(event, (StepCompleted, StepFailed, StepRetrying))
        and event.step == item.number
        and event.attempt == item.attempt
    )


def timer_commit(
    item: WorkItem, worker_id: str, lease_seconds: float, wake_eagerly: bool
) -> CommitRequest:
    """What a due timer does: close a run past a deadline, or wake its workflow."""
    events: tuple[EventKind, ...]
    schedule: tuple[NewWorkItem, ...] = ()
    if item.number == CANCEL_DEADLINE_TIMER:
        events = (RunCancelled(reason="cleanup did not finish within the grace period"),)
    elif item.number == RUN_DEADLINE_TIMER:
        error = ErrorInfo(type="TimeoutError", message="the run did not finish in time")
        events = (RunFailed(error=error),)
    else:
        events = (WaitCompleted(wait=item.number),)
        schedule = (NewWorkItem(kind="workflow", lease=wake_eagerly),)
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker_id,
        lease=item,
        events=events,
        schedule=schedule,
        lease_seconds=lease_seconds,
    )


def exhausted_commit(
    item: WorkItem, max_retries: int, worker_id: str, lease_seconds: float, wake_eagerly: bool
) -> CommitRequest:
    """Fail step attempt ``item`` without running it: earlier attempts lost their leases."""
    message = (
        f"step {item.name!r} reached attempt {item.attempt} with max_retries={max_retries}:"
        " earlier attempts lost their leases (their worker stopped, or their"
        " outcome could not be committed)"
    )
    failed = StepFailed(
        step=item.number,
        attempt=item.attempt,
        error=ErrorInfo(type="RetriesExhaustedError", message=message),
    )
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker_id,
        lease=item,
        events=(failed,),
        schedule=(NewWorkItem(kind="workflow", lease=wake_eagerly),),
        lease_seconds=lease_seconds,
    )


def poisoned_step_commit(
    item: WorkItem, request: CommitRequest, exc: BaseException, wake_eagerly: bool
) -> CommitRequest:
    """``request`` with its outcome replaced by a failure naming why it could not be
    committed."""
    info = error_info(exc)
    error = ErrorInfo(
        type=info.type,
        message=f"the outcome of step {item.name!r} could not be recorded: {info.message}",
        traceback=info.traceback,
    )
    failed = StepFailed(step=item.number, attempt=item.attempt, error=error)
    return msgspec.structs.replace(
        request,
        events=(failed,),
        schedule=(NewWorkItem(kind="workflow", lease=wake_eagerly),),
    )


def poisoned_run_commit(
    item: WorkItem, exc: BaseException, worker_id: str, lease_seconds: float
) -> CommitRequest:
    """Fail the run of workflow item ``item``, whose task failed ``POISON_LIMIT`` times."""
    info = error_info(exc)
    message = (
        f"the workflow task of run {item.run_id} failed {POISON_LIMIT} times in a row"
        f" and the run was failed: {info.type}: {info.message}"
    )
    error = ErrorInfo(type="WorkflowTaskError", message=message, traceback=info.traceback)
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker_id,
        lease=item,
        events=(RunFailed(error=error),),
        lease_seconds=lease_seconds,
    )


_CLOSING_STATUS = {
    RunCompleted: RunStatus.COMPLETED,
    RunFailed: RunStatus.FAILED,
    RunCancelled: RunStatus.CANCELLED,
    RunContinued: RunStatus.CONTINUED,
}


def closing_event(events: Iterable[EventKind]) -> EventKind | None:
    """The event among ``events`` that closes their run, if one does."""
    for event in events:
        if type(event) in _CLOSING_STATUS:
            return event
    return None


def closed_report(instance: WorkflowInstance, closing: EventKind) -> _observe.RunClosed:
    """What the instrumentation is told when this worker's commit of ``closing`` closed the run."""
    return _observe.RunClosed(
        run_id=instance.run_id,
        workflow=instance.definition.name,
        status=_CLOSING_STATUS[type(closing)].value,
        created_at=instance.run_metadata().created_at,
        closed_at=closing.at,
        headers=instance.headers,
        attributes=instance.attributes,
        error=closing.error if isinstance(closing, RunFailed) else None,
    )


async def report_closed_by_timer(world: World, run_id: str, sent: EventKind) -> None:
    """Tell the instrumentation about a run a deadline timer closed (a run timeout, or
    the end of a cancel's grace), if the log ends with the event this worker sent."""
    events = await world.read_events(run_id)
    if not events or type(events[-1]) is not type(sent) or not isinstance(events[0], RunCreated):
        return
    created, closing = events[0], events[-1]
    _observe.run_closed(
        _observe.RunClosed(
            run_id=run_id,
            workflow=created.workflow,
            status=_CLOSING_STATUS[type(closing)].value,
            created_at=created.at,
            closed_at=closing.at,
            headers=decode_headers(created.args),
            attributes=dict(created.attributes),
            error=closing.error if isinstance(closing, RunFailed) else None,
        )
    )
