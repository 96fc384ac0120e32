"""What a commit does: refused on a closed run or a lost lease, else ``commit_flow``.

``commit_flow`` is the commit's logic without I/O, a generator that yields
what it needs from the world (settle a claim, store an event, enqueue work)
and receives the replies; the commit flow (``worlds._flows.commit``) drives it,
once, for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from datetime import datetime
from typing import Any, Literal, NamedTuple

from worlds._rules import runs
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    CommitRequest,
    CommitResult,
    EventKind,
    FailureHandler,
    HookCreated,
    NewWorkItem,
    RateTokenRequested,
    RunContinued,
    RunFailed,
    RunRecord,
    RunStatus,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StreamClosed,
    StreamWritten,
    WorkItem,
)

__all__ = [
    "Ack",
    "Acquire",
    "Append",
    "Committed",
    "Continue",
    "Enqueue",
    "Need",
    "Release",
    "Settle",
    "StartHandler",
    "Stream",
    "TakeToken",
    "after_ack",
    "closed",
    "commit_flow",
    "drive",
    "lost",
    "settled",
    "stale",
    "stale_result",
    "successors",
]


def closed(status: RunStatus, discard: EventKind | None = None) -> CommitResult:
    """The result of a commit to a closed run: refused, with its discard if stored."""
    return CommitResult(ok=False, status=status, events=() if discard is None else (discard,))


def lost(status: RunStatus, holder: str | None, discard: EventKind | None = None) -> CommitResult:
    """The result of a commit whose lease (id, worker, fencing token) is no longer
    held: refused, naming the lease's ``holder`` now, with the zombie's recorded
    ``StepDiscarded`` if one was stored."""
    events = () if discard is None else (discard,)
    return CommitResult(
        ok=False, status=status, events=events, lease_lost=True, lease_holder=holder
    )


def stale(request: CommitRequest, later: Iterable[EventKind]) -> bool:
    """Whether conditional ``request`` must be refused, given the run's events from
    number ``request.expect_seq`` on: one after it that the committer's workflow
    would have seen (not a step attempt's own record), or, with ``request.at``,
    one later than ``at`` (a log's times never go back)."""
    assert request.expect_seq is not None
    for event in later:
        if request.at is not None and event.at > request.at:
            return True
        if event.seq <= request.expect_seq:
            continue
        if isinstance(event, (StepStarted, StepRetrying, StepDiscarded)):
            continue
        if isinstance(event, (AttributeSet, AttributeConflict)) and event.step is not None:
            continue
        return True
    return False


def stale_result(status: RunStatus) -> CommitResult:
    """The result of a conditional commit refused by ``stale``: nothing written."""
    return CommitResult(ok=False, status=status, stale=True)


def after_ack(kind: str, rewake: bool) -> Literal["rewake", "delete"]:
    """What an acknowledged lease does to its item.

    A workflow item woken while leased is made due again; any other is deleted.
    """
    return "rewake" if kind == "workflow" and rewake else "delete"


def successors(request: CommitRequest) -> list[str]:
    """The run ids ``request`` starts by continuing as new (each must be new)."""
    return [event.next_run_id for event in request.events if isinstance(event, RunContinued)]


class Settle(NamedTuple):
    """Ask: settle a unique ``AttributeSet`` (the claim) or a ``HookCreated`` (the token).

    Reply with the event to append: the same event (with its generation) or
    its conflict (``AttributeConflict``, ``HookConflict``).
    """

    run_id: str
    event: AttributeSet | HookCreated


class Acquire(NamedTuple):
    """Ask: settle a ``hold``'s ``SlotRequested``: take the slot or a place in line.

    Reply with the event to append, ``acquired`` set when the slot was taken
    (``worlds._rules.slots.admit_hold`` decides; the world writes the row).
    """

    run_id: str
    event: SlotRequested


class TakeToken(NamedTuple):
    """Ask: settle a ``rate_limit``'s ``RateTokenRequested``: take the pair's next token.

    Reply with the event to append, ``token_at`` set to the token's time
    (``worlds._rules.rates.next_token`` decides; the world writes the token).
    """

    run_id: str
    event: RateTokenRequested


class Release(NamedTuple):
    """Tell: run ``run_id`` gave back hold ``hold`` (its slot or place in line):
    drop the row and promote whom that admits (``slots.promote_flow``)."""

    run_id: str
    hold: int


class Append(NamedTuple):
    """Tell: ``event`` is stored as the next of ``run`` (already numbered and dated)."""

    run: RunRecord
    event: EventKind


class Continue(NamedTuple):
    """Tell: ``run`` continued as new; start ``event.next_run_id`` and move its claims and hooks."""

    run: RunRecord
    event: RunContinued


class Stream(NamedTuple):
    """Tell: append ``event.data`` to stream ``event.name`` of run ``run_id`` (it is open),
    or, for a ``StreamClosed``, mark that stream closed."""

    run_id: str
    event: StreamWritten | StreamClosed


class StartHandler(NamedTuple):
    """Tell: start ``handler``, the failure handler of run ``run_id``
    (``worlds._rules.failures``), unless its run exists (an earlier failure started it)."""

    run_id: str
    handler: FailureHandler


class Ack(NamedTuple):
    """Tell: the leased item is done; ``action`` as ``after_ack`` decided."""

    action: Literal["rewake", "delete"]


class Enqueue(NamedTuple):
    """Ask: add ``new`` to ``run``'s queue; reply ``(run, leased item or None)``."""

    run: RunRecord
    new: NewWorkItem


Need = (
    Settle
    | Acquire
    | TakeToken
    | Append
    | Release
    | Continue
    | Stream
    | StartHandler
    | Ack
    | Enqueue
)
"""What a commit needs its world to do, in order."""


class Committed(NamedTuple):
    """An accepted commit: the run after it, its result and the run attributes it set."""

    run: RunRecord
    result: CommitResult
    attributes: dict[str, AttributeValue]


def commit_flow(
    run: RunRecord, request: CommitRequest, now: datetime, held: tuple[str, bool] | None
) -> Generator[Need, Any, Committed]:
    """The steps of a commit to an open ``run`` whose lease (if any) is held.

    ``held`` is the leased item's kind and rewake mark (``None``: no lease).
    Events are stamped ``request.at`` when given, else ``now``.
    A world drives the generator in its transaction, doing what each yielded
    ``Need`` asks and sending back the reply it names, synchronously or with
    ``await``; the generator returns what the world then stores.
    """
    appended: list[EventKind] = []
    attributes: dict[str, AttributeValue] = {}
    if request.at is not None:
        now = request.at
    for event in request.events:
        if (isinstance(event, AttributeSet) and event.unique) or isinstance(event, HookCreated):
            event = yield Settle(run.id, event)
        if isinstance(event, SlotRequested):
            event = yield Acquire(run.id, event)
        if isinstance(event, RateTokenRequested):
            event = yield TakeToken(run.id, event)
        run, stored = runs.stamped(run, event, now)
        yield Append(run, stored)
        if isinstance(stored, SlotReleased):
            yield Release(run.id, stored.hold)
        if isinstance(stored, RunContinued):
            yield Continue(run, stored)
        if isinstance(stored, StreamWritten | StreamClosed):
            yield Stream(run.id, stored)
        if isinstance(stored, RunFailed) and stored.handler is not None:
            yield StartHandler(run.id, stored.handler)
        if isinstance(stored, AttributeSet) and stored.step is None:
            attributes[stored.key] = stored.value
        appended.append(stored)
    leased: list[WorkItem] = []
    if not run.status.is_closed:
        if held is not None and request.ack:
            yield Ack(after_ack(*held))
        for new in request.schedule:
            run, item = yield Enqueue(run, new)
            if item is not None:
                leased.append(item)
    result = CommitResult(ok=True, status=run.status, events=tuple(appended), leased=tuple(leased))
    return Committed(run, result, attributes)


def settled(events: Iterable[EventKind], step: int, attempt: int) -> bool:
    """Whether the log already holds an outcome (or a discard) of this step attempt.

    A late result refused for a lost lease is recorded as ``StepDiscarded``
    unless it is settled: then it is the retry of a commit that had landed.
    """
    return any(
        isinstance(event, (StepCompleted, StepFailed, StepRetrying, StepDiscarded))
        and event.step == step
        and event.attempt == attempt
        for event in events
    )


def drive(flow: Generator[Need, Any, Committed], do: Callable[[Need], object]) -> Committed:
    """Run ``flow`` to its end synchronously: answer each need with ``do(need)``.

    For a world whose I/O blocks; a world that awaits its I/O drives the flow
    itself with ``flow.send``.
    """
    reply: object = None
    while True:
        try:
            need = flow.send(reply)
        except StopIteration as stop:
            done: Committed = stop.value
            return done
        reply = do(need)
