"""Retry and fork: reopening a failed or cancelled run, and forking a run from a step.

``plan_reopen`` decides ``World.reopen_run``: a failed or cancelled run gets
``RunReopened`` (status running again, same id, its log and claims kept) and
the work it needs to go on: every step it created whose outcome is missing or
a failure runs again (a fresh attempt, numbered after the last), every timer
still waiting is queued at its time, and its workflow is woken. A run in any
other status is left alone.

``plan_fork`` decides ``World.fork_run``: the new run's log is the source's
log before its step ``from_step`` was created (the steps it created earlier,
and their outcomes, wherever they are in the log), then ``RunForked``; it
queues the steps of that prefix that have no outcome and its waiting timers.
The fork takes none of the source's claims and none of the attributes that
link it to a parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from worlds._rules.children import ON_PARENT_CLOSE_KEY, PARENT_KEY
from worlds.types import (
    EventKind,
    HookCreated,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunCreated,
    RunFailed,
    RunForked,
    RunRecord,
    RunReopened,
    RunStatus,
    SlotReleased,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepStarted,
    StoredValue,
    WaitCompleted,
    WaitCreated,
)

__all__ = [
    "ForkPlan",
    "ReopenPlan",
    "effective_log",
    "held_back_work",
    "hook_taken",
    "hooks_to_hold",
    "plan_fork",
    "plan_reopen",
    "reopen_base",
    "reopened_by",
]

REOPENABLE = (RunStatus.FAILED, RunStatus.CANCELLED)


class ReopenPlan(NamedTuple):
    """Append ``event`` (None: nothing to do) and queue ``work``."""

    event: RunReopened | None
    work: tuple[NewWorkItem, ...] = ()


class ForkPlan(NamedTuple):
    """The fork: its ``RunCreated`` arguments and attributes, the events after that
    (unnumbered, ``RunForked`` last; the world stamps them now) and its work."""

    args: bytes
    attributes: dict[str, StoredValue]
    events: tuple[EventKind, ...]
    work: tuple[NewWorkItem, ...]
    limits: dict[str, int]
    """The limits of its ``Limited`` start attributes (``RunCreated.limits``)."""


def _pending_work(
    events: Sequence[EventKind], rerun_failed: bool
) -> tuple[list[int], list[NewWorkItem]]:
    """The steps without a (successful) outcome and the timers still waiting in ``events``."""
    created: dict[int, StepCreated] = {}
    done: set[int] = set()
    attempts: dict[int, int] = {}
    timers: dict[int, WaitCreated] = {}
    for event in events:
        if isinstance(event, StepCreated):
            created[event.step] = event
        elif isinstance(event, StepCompleted) or (
            isinstance(event, StepFailed) and not rerun_failed
        ):
            done.add(event.step)
        elif isinstance(event, StepStarted):
            attempts[event.step] = max(attempts.get(event.step, 0), event.attempt)
        elif isinstance(event, WaitCreated):
            timers[event.wait] = event
        elif isinstance(event, WaitCompleted):
            timers.pop(event.wait, None)
    steps = [number for number in sorted(created) if number not in done]
    work = [
        NewWorkItem(
            kind="step",
            name=created[number].name,
            number=number,
            attempt=attempts.get(number, 0) + 1,
            payload=created[number].args,
        )
        for number in steps
    ]
    work += [
        NewWorkItem(kind="timer", name="", number=number, available_at=timer.until)
        for number, timer in sorted(timers.items())
    ]
    return steps, work


def plan_reopen(run: RunRecord, events: Sequence[EventKind], by: str) -> ReopenPlan:
    """What ``reopen_run`` does to ``run`` with log ``events``."""
    if run.status not in REOPENABLE:
        return ReopenPlan(None)
    steps, work = _pending_work(effective_log(events), rerun_failed=True)
    return ReopenPlan(RunReopened(by=by, steps=tuple(steps)), _queued(run.workflow, work))


def reopened_by(events: Sequence[EventKind], by: str) -> bool:
    """Whether the log ``events`` records a ``RunReopened`` by ``by``: a bulk retry
    (``reopen_listed``) names itself in ``by``, so it never reopens a run twice."""
    return any(isinstance(event, RunReopened) and event.by == by for event in events)


def _queued(workflow: str, work: Sequence[NewWorkItem]) -> tuple[NewWorkItem, ...]:
    """``work`` as queued for a run of ``workflow`` (timers carry its name), then its wake."""
    timers = tuple(
        NewWorkItem(kind=w.kind, name=workflow, number=w.number, available_at=w.available_at)
        if w.kind == "timer"
        else w
        for w in work
    )
    return (*timers, NewWorkItem(kind="workflow", name=workflow))


def held_back_work(workflow: str, log: Sequence[EventKind]) -> tuple[NewWorkItem, ...]:
    """The work a reopened or forked run of ``workflow`` (replayed log ``log``) gets
    once it holds its slots again: what ``plan_reopen``/``plan_fork`` would have
    queued, had it not waited for them."""
    _, work = _pending_work(log, rerun_failed=False)
    return _queued(workflow, work)


def hooks_to_hold(log: Sequence[EventKind]) -> list[HookCreated]:
    """The hooks a reopened or forked run with the replayed ``log`` holds again: every
    hook its body created (closing let their tokens go, yet the body replays them
    as created and waits on them)."""
    return [e for e in log if isinstance(e, HookCreated)]


def hook_taken(run_id: str, token: str, holder_run_id: str) -> ValueError:
    """The refusal of reopening or forking into ``run_id`` while another run holds one
    of the tokens its body created."""
    return ValueError(
        f"run {run_id} cannot go on: its hook token {token!r} is held by run "
        f"{holder_run_id} now; close that run first"
    )


def plan_fork(source: RunRecord, events: Sequence[EventKind], from_step: int, by: str) -> ForkPlan:
    """The fork of ``source`` (log ``events``) that runs its step ``from_step`` anew.

    Raises:
        ValueError: ``from_step`` is not a step the source created.
    """
    log = effective_log(events)
    cut = next(
        (i for i, e in enumerate(log) if isinstance(e, StepCreated) and e.step == from_step),
        None,
    )
    if from_step < 1 or cut is None:
        raise ValueError(
            f"run {source.id} has no step {from_step}: fork from one of its steps (1, 2, ...)"
        )
    earlier = {e.step for e in log[:cut] if isinstance(e, StepCreated)}
    prefix = list(log[:cut]) + [
        e
        for e in log[cut:]
        if isinstance(e, (StepStarted, StepCompleted, StepFailed)) and e.step in earlier
    ]
    prefix = [
        e
        for e in prefix
        if not isinstance(e, (RunCancelRequested, RunCancelled, RunFailed, RunReopened, RunForked))
    ]
    first = prefix[0]
    assert isinstance(first, RunCreated), "a log starts with RunCreated"
    attributes = {
        k: v for k, v in first.attributes.items() if k not in (PARENT_KEY, ON_PARENT_CLOSE_KEY)
    }
    rest = [msgspec.structs.replace(e, seq=0) for e in prefix[1:]]
    forked = RunForked(source_run_id=source.id, from_step=from_step, by=by)
    limits = {k: v for k, v in first.limits.items() if k in attributes}
    work = held_back_work(source.workflow, rest)
    return ForkPlan(first.args, attributes, (*rest, forked), work, limits)


def effective_log(events: Sequence[EventKind]) -> list[EventKind]:
    """The log as the body replays it: what each ``RunReopened`` undid is passed over
    (the closing event and cancel request before it, the failures of the steps it
    re-ran, and the ends of ``hold()`` blocks recorded after the first of those or
    the cancel request: unwinding that the body now runs anew, so the block is
    held again and its end is recorded when the body really leaves it), and the
    ``RunReopened``/``RunForked`` markers themselves."""
    log: list[EventKind] = []
    for event in events:
        if isinstance(event, RunReopened):
            rerun = set(event.steps)
            turn = next(
                (
                    i
                    for i, e in enumerate(log)
                    if isinstance(e, RunCancelRequested)
                    or (isinstance(e, StepFailed) and e.step in rerun)
                ),
                len(log),
            )
            log = [
                e
                for i, e in enumerate(log)
                if not isinstance(e, (RunFailed, RunCancelled, RunCancelRequested))
                and not (isinstance(e, StepFailed) and e.step in rerun)
                and not (isinstance(e, SlotReleased) and i > turn)
            ]
        elif not isinstance(event, RunForked):
            log.append(event)
    return log


def reopen_base(events: Sequence[EventKind], step: int) -> int:
    """The last attempt of ``step`` before the last reopening that re-ran it (0: none):
    a re-run step's retry budget counts its attempts after that."""
    base = 0
    last = 0
    for event in events:
        if isinstance(event, StepStarted) and event.step == step:
            last = max(last, event.attempt)
        elif isinstance(event, RunReopened) and step in event.steps:
            base = last
    return base
