"""The replay recorder: a run's replay cursor, its outbox and the calls it answers.

Every command the workflow body issues goes through ``record`` or ``ask``, the
one place that decides *new, matched or mismatch* (``rfcs/0001-execution-model.md``):

* past the end of the recorded commands the command is new: ``new()`` builds
  it and it goes to the outbox;
* otherwise the next recorded command must be of the call's kind and pass its
  ``same`` test, and the call binds to it;
* anything else fails the run with ``NonDeterminismError`` (recorded through
  ``fail``, so ``except Exception`` in user code cannot hide it) and raises it.

``ask`` is for a call the body gets an answer to at the next quiescent point,
in call order, whether the answer comes from the log (replay), at once (a
plain attribute) or from the world when the outbox commits (a unique claim, a
hook token, a child start, a slot): ``answer`` receives it then.

A *command component* (steps and timers, attributes, hooks, holds, children,
patches, streams) takes the recorder and the loop, never the instance. It
issues each command through ``record`` or ``ask`` and keeps the state of its
own kind; the instance routes the external events of that kind to it. A new
kind of command is one new component.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from workflow.engine._commands import is_command, is_external, issuing_call
from workflow.errors import NonDeterminismError, NotInWorkflowError
from worlds.events import EPOCH, CommandEvent, ExternalEvent
from worlds.semantics import effective_log
from worlds.types import (
    CreateRunRequest,
    EventKind,
    NewWorkItem,
    PatchMarker,
    RunForked,
    RunReopened,
    RunStarted,
    StepCompleted,
    StepFailed,
)

__all__ = ["Commit", "Recorder"]

E = TypeVar("E", bound=CommandEvent)
F = TypeVar("F", bound=CommandEvent)


@dataclass
class Commit:
    """What the instance asks the engine to write next: its outbox."""

    events: list[EventKind] = field(default_factory=list)
    schedule: list[NewWorkItem] = field(default_factory=list)
    children: dict[int, CreateRunRequest] = field(default_factory=dict)
    """The child runs to create before committing, by the number of their ``ChildStarted``."""


@dataclass(slots=True)
class _Call:
    """A call answered at the next quiescent point, once its answer is known."""

    answer: Callable[[Any], None]
    outcome: CommandEvent | None
    outbox_index: int = -1
    """Where the world's answer will be among the events of the next commit."""


class Recorder:
    """One run's replay cursor, outbox and calls waiting for their answers.

    Args:
        fail: records a run's failure (the first one counts); ``mismatch`` calls it.
    """

    def __init__(self, fail: Callable[[BaseException], None]) -> None:
        self.outbox = Commit()
        """The commands and work not yet handed to the engine (components add to it)."""
        self.last_seq = 0
        """The highest sequence number fed in."""
        self.latest_at = EPOCH
        """The time of the latest event read or written."""
        self.started = False
        """Whether ``RunStarted`` is recorded (or in a commit handed over)."""
        self.closed = False
        """Set when the instance is evicted: any further command is refused."""
        self._fail = fail
        self.externals: collections.deque[ExternalEvent] = collections.deque()
        """External events fed and not yet delivered, in log order (the instance takes them)."""
        self.calls: list[_Call] = []
        """Calls waiting to be answered at the next quiescent point, in call order."""
        self._recorded: collections.deque[CommandEvent] = collections.deque()
        self._own_seqs: set[int] = set()
        self._position = 0
        self._outcome_horizon: int | None = None

    # ------------------------------------------------------------ the log

    @property
    def position(self) -> int:
        """How many commands the body has issued so far (the next one's position)."""
        return self._position

    @property
    def replaying(self) -> bool:
        """True while recorded commands are still ahead of the body."""
        return bool(self._recorded)

    def is_stale(self, events: list[EventKind]) -> bool:
        """True if ``events`` hold commands this run's body did not issue here
        (another worker advanced the run), or a reopening."""
        return any(
            (is_command(e) and e.seq not in self._own_seqs) or isinstance(e, RunReopened)
            for e in events
        )

    def feed(self, events: list[EventKind]) -> None:
        """Take new log entries: queue recorded commands and external events.

        A log holding ``RunReopened`` or ``RunForked`` markers is fed whole and
        replayed as they say (``worlds.semantics.effective_log``).
        """
        if any(isinstance(e, (RunReopened, RunForked)) for e in events):
            events = effective_log(events)
        own = self._own_seqs
        for event in events:
            if event.seq in own:
                own.discard(event.seq)
            elif is_external(event):
                self.externals.append(event)
            elif is_command(event):
                self._recorded.append(event)
            # else a step attempt's attribute: its own record, which the body never sees
            self.last_seq = max(self.last_seq, event.seq)
            self.latest_at = max(self.latest_at, event.at)

    def _horizon(self) -> int | None:
        """The last sequence number up to which the whole log is known here (what
        was read, then what was written right after); None when a gap not read
        lies below something written."""
        seq = self.last_seq
        while seq + 1 in self._own_seqs:
            seq += 1
        return None if any(own > seq for own in self._own_seqs) else seq

    def feed_outcome(self, event: StepCompleted | StepFailed) -> int | None:
        """Take a step's outcome before it is stored (one transaction per step).

        It is delivered like any external event; the next ``committed`` takes
        what the world appended for it first. Returns the horizon the commit
        must be conditional on (the last sequence number up to which the whole
        log is known here), or None (and feeds nothing) when there is none.
        """
        horizon = self._horizon()
        if horizon is not None:
            self._outcome_horizon = horizon
            self.externals.append(event)
            self.latest_at = max(self.latest_at, event.at)
        return horizon

    def take_commit(self, ended: bool) -> Commit:
        """Hand over the outbox, led by ``RunStarted`` if the run has not started
        and records something or ``ended``; ``committed`` follows."""
        commit, self.outbox = self.outbox, Commit()
        if not self.started and (commit.events or ended):
            self.started = True
            commit.events.insert(0, RunStarted())
            for call in self.calls:
                if call.outcome is None:
                    call.outbox_index += 1
        return commit

    def committed(self, appended: tuple[EventKind, ...]) -> None:
        """Record what the world appended for the last ``take_commit`` (after a
        ``feed_outcome``: the outcome's entry first). The world checked that
        nothing the body would see came after the horizon ``feed_outcome`` gave."""
        horizon, self._outcome_horizon = self._outcome_horizon, None
        commands = appended if horizon is None else appended[1:]
        for event in commands:
            self._own_seqs.add(event.seq)
            self.latest_at = max(self.latest_at, event.at)
        for call in self.calls:
            if call.outcome is None:
                outcome = commands[call.outbox_index]
                assert is_command(outcome), f"{outcome!r} answers no call"
                call.outcome = outcome
            call.outbox_index = -1
        if horizon is not None:
            self.last_seq = max(horizon, *(event.seq for event in appended))
            if self._own_seqs:
                self._own_seqs = {seq for seq in self._own_seqs if seq > self.last_seq}
            self.latest_at = max(self.latest_at, appended[0].at)

    # ------------------------------------------------------------ the calls

    @property
    def needs_world(self) -> bool:
        """Whether a pending call's answer comes from the world (commit first)."""
        return any(call.outcome is None for call in self.calls)

    def answer_calls(self) -> None:
        """Answer the pending calls, in call order (all answers known)."""
        calls, self.calls = self.calls, []
        for call in calls:
            assert call.outcome is not None, "a call is answered only once its answer is known"
            call.answer(call.outcome)

    # ------------------------------------------------------------ the commands

    def next_recorded(self) -> CommandEvent | None:
        """Take the next recorded command for a new call; None past the recorded end.

        Patch markers the body does not ask about here are passed over: the
        ``patched`` call that recorded one may since have been removed.
        """
        if self.closed:
            raise NotInWorkflowError("this workflow instance was evicted")
        self._position += 1
        recorded = self._recorded
        while recorded and isinstance(recorded[0], PatchMarker):
            recorded.popleft()
        return recorded.popleft() if recorded else None

    def mismatch(self, recorded: CommandEvent, issued: str) -> NonDeterminismError:
        """Fail the run: the body issued ``issued`` where the log holds ``recorded``."""
        error = NonDeterminismError(self._position - 1, issuing_call(recorded), issued)
        self._fail(error)
        return error

    def record(
        self,
        issued: str,
        kind: type[E],
        new: Callable[[], E],
        same: Callable[[E], bool] | None = None,
    ) -> E:
        """Issue a command: the recorded one it matches, or ``new()`` in the outbox.

        Raises:
            NonDeterminismError: the log holds another command here.
        """
        recorded = self.next_recorded()
        if recorded is None:
            event = new()
            self.outbox.events.append(event)
            return event
        if isinstance(recorded, kind) and (same is None or same(recorded)):
            return recorded
        raise self.mismatch(recorded, issued)

    def ask(
        self,
        issued: str,
        kind: type[E],
        refused: type[F],
        new: Callable[[], E],
        same: Callable[[E | F], bool] | None,
        answer: Callable[[E | F], None],
        *,
        answered: bool = False,
    ) -> E | F:
        """Issue a command that answers its call at the next quiescent point.

        ``refused`` is the kind the world records instead when it refuses the
        command (a conflict); on replay either matches. ``answer`` gets the
        recorded outcome, the new command itself when ``answered`` (no world
        needed), else what the world appends for it.

        Raises:
            NonDeterminismError: the log holds another command here.
        """
        recorded = self.next_recorded()
        if recorded is None:
            event = new()
            events = self.outbox.events
            events.append(event)
            if answered:
                self.calls.append(_Call(answer, event))
            else:
                self.calls.append(_Call(answer, None, len(events) - 1))
            return event
        if isinstance(recorded, (kind, refused)) and (same is None or same(recorded)):
            self.calls.append(_Call(answer, recorded))
            return recorded
        raise self.mismatch(recorded, issued)

    def take_marker(self, name: str) -> bool | None:
        """For ``patched(name)``: True if the log records its marker here (taken),
        False if other commands are recorded here (the run took the old code),
        None past the recorded end (a new run: the caller records the marker)."""
        if self.closed:
            raise NotInWorkflowError("this workflow instance was evicted")
        recorded = self._recorded
        markers: list[PatchMarker] = []
        while recorded and isinstance(head := recorded[0], PatchMarker):
            markers.append(head)
            recorded.popleft()
        found = any(marker.name == name for marker in markers)
        for marker in reversed(markers):
            if marker.name != name:
                recorded.appendleft(marker)
        if found:
            return True
        return False if recorded else None
