"""One workflow task, driven the same way everywhere: advance, take the commit,
mark the steps this worker takes at once, commit, record what was committed.

``run_task`` is that sequence, written once. The worker's workflow tasks, the
one-transaction path of a finished step, the eager first task of a run started
in this process and the replayer differ only in how a turn is sent (``Send``):
to the world, together with a step's outcome, ahead of the run's creation, or
nowhere. The caller feeds the instance first and decides, from the outcome,
whether to keep the instance or drop it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from workflow import _observe
from workflow.engine._capacity import Capacity
from workflow.engine._commits import closed_report, closing_event
from workflow.engine._instance import WorkflowInstance
from workflow.engine._recorder import Commit
from workflow.engine._registry import Registry
from worlds.types import CommitResult, EventKind, NewWorkItem, WorkItem

__all__ = ["EagerSteps", "Send", "TaskOutcome", "Turn", "run_task"]


class EagerSteps:
    """Which new steps of a task this worker leases to itself in the same commit."""

    def __init__(self, registry: Registry, capacity: Capacity) -> None:
        self._registry = registry
        self._capacity = capacity
        self._steps = registry.steps

    def mark(
        self, instance: WorkflowInstance, schedule: list[NewWorkItem]
    ) -> tuple[tuple[NewWorkItem, ...], int]:
        """``schedule`` with the steps this worker starts now marked ``lease``, and
        the extra slots they need."""
        self._registry.learn(instance.step_definitions)
        return self._capacity.mark_eager(schedule, self._steps)


@dataclass(slots=True)
class Turn:
    """What one ``advance`` of the body hands over to be committed."""

    blocked: bool
    """The body waits for the world's answer to a claim: commit, then advance again."""
    commit: Commit
    schedule: tuple[NewWorkItem, ...]
    """``commit.schedule``, with the steps this worker takes at once marked eager."""
    extra_slots: int
    """Slots those eager steps need besides the one of the item committing them."""


Send = Callable[[Turn], Awaitable[CommitResult | None]]
"""Commits a turn and returns the world's answer; None when it sends nothing. It
reserves the turn's ``extra_slots`` before its first wait."""


@dataclass(slots=True)
class TaskOutcome:
    """How a task ended: its last turn and the world's last answer."""

    turn: Turn
    result: CommitResult | None
    """None when the last turn was not sent."""
    leased: list[WorkItem]
    """Everything the task's commits leased to this worker."""

    @property
    def committed(self) -> bool:
        """Whether every turn was sent and committed."""
        return self.result is not None and self.result.ok


async def run_task(
    instance: WorkflowInstance,
    send: Send,
    eager: EagerSteps | None = None,
    *,
    prepare: Callable[[Commit], Awaitable[None]] | None = None,
    settle_claims: bool = True,
) -> TaskOutcome:
    """Drive ``instance`` (already fed) through one task.

    Each turn advances the body, takes its commit, lets ``prepare`` finish it
    (create the children it starts), marks the steps ``eager`` takes (none
    without it), sends the turn and records what the world appended. Marking
    and ``send``'s reservation of the slots it needs happen with no wait in
    between. With ``settle_claims`` a blocked body (waiting for a unique
    claim) goes on after the commit, until it is not blocked; without it the
    task ends after one turn. A run closed by this task is reported to the
    instrumentation (``workflow._observe``).
    """
    leased: list[WorkItem] = []
    closing: EventKind | None = None
    while True:
        blocked = instance.advance()
        commit = instance.take_commit()
        if prepare is not None:
            await prepare(commit)
        if eager is None:
            schedule, extra_slots = tuple(commit.schedule), 0
        else:
            schedule, extra_slots = eager.mark(instance, commit.schedule)
        turn = Turn(blocked, commit, schedule, extra_slots)
        result = await send(turn)
        if result is None:
            return TaskOutcome(turn, None, leased)
        leased.extend(result.leased)
        if not result.ok:
            return TaskOutcome(turn, result, leased)
        instance.committed(result.events)
        closing = closing or closing_event(result.events)
        if not (blocked and settle_claims):
            break
    if closing is not None and _observe.current() is not None:
        _observe.run_closed(closed_report(instance, closing))
    return TaskOutcome(turn, result, leased)
