"""The event log's vocabulary: attribute values, run statuses, errors and events.

Like ``worlds.types`` (which re-exports every name here), this module imports
nothing from the project.

Events are msgspec structs tagged by ``kind``. The engine creates them without a
sequence number; the world assigns ``seq`` (dense per run, starting at 1) and
``at`` when it appends them, in the same transaction as the state change the
event implies (see ``rfcs/0001-execution-model.md``).
"""

from __future__ import annotations

import enum
from datetime import UTC, datetime
from typing import Any, TypeAlias

import msgspec

__all__ = [
    "EPOCH",
    "AttributeConflict",
    "AttributeSet",
    "AttributeValue",
    "ChildClosed",
    "ChildConflict",
    "ChildStarted",
    "CommandEvent",
    "ErrorInfo",
    "Event",
    "EventKind",
    "ExternalEvent",
    "FailureHandler",
    "HookConflict",
    "HookCreated",
    "HookReceived",
    "PatchMarker",
    "RateTokenRequested",
    "RunCancelRequested",
    "RunCancelled",
    "RunCompleted",
    "RunContinued",
    "RunCreated",
    "RunFailed",
    "RunForked",
    "RunReopened",
    "RunStarted",
    "RunStatus",
    "SlotAcquired",
    "SlotReleased",
    "SlotRequested",
    "StepCompleted",
    "StepCreated",
    "StepDiscarded",
    "StepFailed",
    "StepRetrying",
    "StepStarted",
    "StoredValue",
    "StreamClosed",
    "StreamWritten",
    "UpdateReceived",
    "UpdateRejected",
    "UpdateReplied",
    "WaitCompleted",
    "WaitCreated",
    "utcnow",
]

AttributeValue: TypeAlias = "str | int | float | bool | datetime | None"
"""A scalar an attribute may hold; nesting is not allowed."""

StoredValue: TypeAlias = Any
"""An ``AttributeValue`` inside a struct.

msgspec refuses a union of ``str`` and ``datetime`` as a field type (both are
strings in JSON), so struct fields holding attribute values are typed ``Any``;
MessagePack's own types map one to one onto ``AttributeValue``, so decoding
gives back exactly the value that was encoded.
"""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(UTC)


class RunStatus(enum.StrEnum):
    """Where a run is in its life. All but the first three are closed states.

    ``CANCELLING`` means cancellation was requested: the body is running its
    cleanup, within a grace period. ``CONTINUED`` means the run closed by
    ``continue_as_new``: a new run of the same workflow carries on with its claims.
    """

    PENDING = "pending"
    RUNNING = "running"
    CANCELLING = "cancelling"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED = "continued"

    @property
    def is_closed(self) -> bool:
        """True once the run can make no more progress."""
        return self in _CLOSED


_CLOSED = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED}
)


class ErrorInfo(msgspec.Struct, frozen=True):
    """A recorded exception: what a step or a run failed with."""

    type: str
    message: str
    traceback: str | None = None


# --------------------------------------------------------------------------- events


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind"):
    """Base of every entry in a run's log. ``seq`` and ``at`` are set by the world."""

    seq: int = 0
    at: datetime = EPOCH


class RunCreated(Event, tag="run_created", frozen=True, kw_only=True):
    """The run exists; its arguments and start-time attributes are recorded.

    ``start_at`` is when a run created to wait starts at the earliest
    (``start(delay=)``, or a debounce's start, moved by each debounce, which
    rewrites this event); ``debounced`` says a debounce (``start_or_debounce``)
    created it. Both are for people reading the log: no rule reads them.
    """

    workflow: str
    args: bytes
    attributes: dict[str, StoredValue] = {}
    limits: dict[str, int] = {}
    """The limit of each ``Limited`` start attribute (by key): a reopened or forked
    run takes those slots again before it runs."""
    start_at: datetime | None = None
    debounced: bool = False
    priority: int = 0
    """``start(..., priority=n)``: among runs waiting for the same slots or tokens,
    the lowest number is admitted first."""
    rate_limited: tuple[str, ...] = ()
    """The keys of its ``RateLimited`` start attributes: ``start_at`` is then (also)
    when its tokens let it start."""
    rates: dict[str, tuple[int, float]] = {}
    """Each ``RateLimited`` start attribute's rate (by key): (limit, per seconds)."""


class RunStarted(Event, tag="run_started", frozen=True, kw_only=True):
    """A worker executed the workflow body for the first time."""


class RunCompleted(Event, tag="run_completed", frozen=True, kw_only=True):
    """The workflow body returned; ``result`` is its msgpack-encoded value."""

    result: bytes


class FailureHandler(msgspec.Struct, frozen=True):
    """The run a failed run's ``@workflow(on_failure=...)`` starts: the handler
    workflow's name and its encoded arguments (the failed run's id and error)."""

    workflow: str
    args: bytes


class RunFailed(Event, tag="run_failed", frozen=True, kw_only=True):
    """The workflow body raised.

    With ``handler``, the world starts the handler's run in the transaction that
    stores this event (``worlds._rules.failures``): once, since a run fails once."""

    error: ErrorInfo
    handler: FailureHandler | None = None


class RunCancelled(Event, tag="run_cancelled", frozen=True, kw_only=True):
    """The run was cancelled; nothing of it runs any more."""

    reason: str | None = None


class RunContinued(Event, tag="run_continued", frozen=True, kw_only=True):
    """The run continued as new: it closed, and run ``next_run_id`` of the same
    workflow started with ``args`` and this run's attributes, taking over its
    unique claims (each with a new generation), in the same transaction.

    The run's live hook tokens move to the next run too, unbound (hook 0) until
    it creates a hook with the token again. ``hooks_read`` says how many
    payloads the body took from each token's hook; the world moves the rest of
    the token's ``HookReceived`` payloads, in order, to the next run's log as
    ``HookReceived(hook=0, token=...)``: a payload accepted by ``resume_hook``
    reaches the chain exactly once."""

    next_run_id: str
    args: bytes
    hooks_read: dict[str, int] = {}
    limits: dict[str, int] = {}
    """This run's ``RunCreated.limits``, which the next run's ``RunCreated`` records
    too (it takes over the start-time slots)."""


class RunCancelRequested(Event, tag="run_cancel_requested", frozen=True, kw_only=True):
    """Cancellation was requested: the body may clean up until ``deadline``.

    The world dropped the run's queued steps and timers in the same step, and
    recorded a ``StepDiscarded`` for each step attempt that was in flight.
    """

    reason: str | None = None
    deadline: datetime


class StepCreated(Event, tag="step_created", frozen=True, kw_only=True):
    """The workflow called a step; ``step`` numbers steps densely within the run."""

    step: int
    name: str
    args: bytes


class StepStarted(Event, tag="step_started", frozen=True, kw_only=True):
    """A worker began an attempt of a step (attempts count from 1)."""

    step: int
    attempt: int


class StepCompleted(Event, tag="step_completed", frozen=True, kw_only=True):
    """An attempt returned; ``result`` is its msgpack-encoded value. ``build_id`` is
    the build of the worker that ran it (``Worker(build_id=...)``, RFC 0025), if any."""

    step: int
    attempt: int
    result: bytes
    build_id: str | None = None


class StepRetrying(Event, tag="step_retrying", frozen=True, kw_only=True):
    """An attempt failed and another is scheduled at ``retry_at``."""

    step: int
    attempt: int
    error: ErrorInfo
    retry_at: datetime


class StepFailed(Event, tag="step_failed", frozen=True, kw_only=True):
    """The step failed for good: a fatal error or retries exhausted."""

    step: int
    attempt: int
    error: ErrorInfo


class StepDiscarded(Event, tag="step_discarded", frozen=True, kw_only=True):
    """An attempt finished after its run closed; its outcome is not progress."""

    step: int
    attempt: int
    outcome: str


class AttributeSet(Event, tag="attribute_set", frozen=True, kw_only=True):
    """An attribute was set on the run, or on a step attempt when ``step`` is set.

    For a unique pair, ``generation`` is the claim's fencing token, and ``ttl``
    and ``release_on`` its reuse window (see ``ReuseWindow``).
    """

    key: str
    value: StoredValue
    unique: bool = False
    generation: int | None = None
    step: int | None = None
    attempt: int | None = None
    ttl: float | None = None
    release_on: frozenset[RunStatus] = frozenset()


class AttributeConflict(Event, tag="attribute_conflict", frozen=True, kw_only=True):
    """A unique claim was refused because ``holder_run_id`` holds the pair."""

    key: str
    value: StoredValue
    holder_run_id: str
    step: int | None = None
    attempt: int | None = None


class WaitCreated(Event, tag="wait_created", frozen=True, kw_only=True):
    """The workflow started a durable timer that fires at ``until``."""

    wait: int
    until: datetime


class WaitCompleted(Event, tag="wait_completed", frozen=True, kw_only=True):
    """A durable timer fired."""

    wait: int


class HookCreated(Event, tag="hook_created", frozen=True, kw_only=True):
    """The workflow created a hook that ``token`` resumes from outside."""

    hook: int
    token: str
    attributes: dict[str, StoredValue] = {}


class HookReceived(Event, tag="hook_received", frozen=True, kw_only=True):
    """A payload arrived for a hook; ``resume_id`` deduplicates deliveries.

    ``hook`` 0 means the run holds ``token`` (moved to it by continue-as-new)
    but has not created a hook with it yet: the payload goes to the hook the
    run creates with that token. ``token`` is set only then.
    """

    hook: int
    payload: bytes
    resume_id: str | None = None
    token: str = ""


class HookConflict(Event, tag="hook_conflict", frozen=True, kw_only=True):
    """The hook's token is held by another run."""

    hook: int
    token: str
    holder_run_id: str


class ChildStarted(Event, tag="child_started", frozen=True, kw_only=True):
    """The workflow started child run ``run_id`` (its ``child``-th start in this run).

    The engine created the child (``CreateRunRequest`` with these fields and
    the parent link attributes) before committing this command, so replay
    answers the start from the log and never creates the child again.
    """

    child: int
    run_id: str
    workflow: str


class ChildConflict(Event, tag="child_conflict", frozen=True, kw_only=True):
    """A child start was refused: ``holder_run_id`` holds the unique pair; no run was made.

    ``limit`` is set when a full ``Limited(..., on_full="fail")`` pair (or its key's
    limit) refused it; ``retry_after`` and ``per`` when a full
    ``RateLimited(..., on_full="fail")`` window did.
    """

    child: int
    run_id: str
    key: str
    value: StoredValue
    holder_run_id: str
    limit: int | None = None
    retry_after: float | None = None
    per: float | None = None


class ChildClosed(Event, tag="child_closed", frozen=True, kw_only=True):
    """Child run ``run_id`` of this run closed; the world appends this to the parent
    in the transaction that closed the child (``worlds._rules.children``).

    ``next_run_id`` is set when the child continued as new: the parent then
    waits for that run instead. ``reason`` is a cancelled child's reason.
    """

    run_id: str
    status: RunStatus
    result: bytes | None = None
    error: ErrorInfo | None = None
    reason: str | None = None
    next_run_id: str | None = None


class PatchMarker(Event, tag="patch_marker", frozen=True, kw_only=True):
    """The workflow took the new branch of ``patched(name)`` (recorded once per name)."""

    name: str


class StreamWritten(Event, tag="stream_written", frozen=True, kw_only=True):
    """Workflow code wrote ``data`` to its stream ``name``; the world appended the
    chunk to the stream in the transaction that committed this command."""

    name: str
    data: bytes


class StreamClosed(Event, tag="stream_closed", frozen=True, kw_only=True):
    """Workflow code closed its stream ``name`` (``close_stream``); the world marked the
    stream closed in the transaction that committed this command: it takes no more
    chunks, and readers stop after the last one."""

    name: str


class RunReopened(Event, tag="run_reopened", frozen=True, kw_only=True):
    """A failed or cancelled run was reopened (``Run.retry``) by ``by``: same id,
    recorded steps kept. The engine replays the log as if the run had never
    closed: the closing event, the cancel request and the failures of ``steps``
    before this event are passed over, and ``steps`` run again (their work was
    queued with this event, as were the run's timers still due)."""

    by: str
    steps: tuple[int, ...] = ()


class RunForked(Event, tag="run_forked", frozen=True, kw_only=True):
    """This run was forked by ``by`` from run ``source_run_id``: the events before it
    are the source's log up to its step ``from_step``, which this run runs anew."""

    source_run_id: str
    from_step: int
    by: str


class SlotRequested(Event, tag="slot_requested", frozen=True, kw_only=True):
    """Workflow code asked for a slot of a limited pair (``hold``): a command.

    The world settles it in the commit: ``acquired`` says whether the slot was
    taken at once; else the run waits in line, holding no worker, until a
    ``SlotAcquired`` for the same ``hold`` number is appended to its log.
    """

    hold: int
    key: str
    value: StoredValue
    limit: int
    acquired: bool = False
    refused: int | None = None
    """Set by the world when the pair is held with another limit (that one): the
    block never enters and ``hold`` raises ``ValueError`` in the workflow."""
    priority: int = 0
    """``hold(..., priority=n)``: waiters are promoted lowest number first."""


class SlotAcquired(Event, tag="slot_acquired", frozen=True, kw_only=True):
    """A waiting ``hold`` was promoted: the run now holds its slot (appended by the world)."""

    hold: int


class SlotReleased(Event, tag="slot_released", frozen=True, kw_only=True):
    """Workflow code gave back slot (or place in line) ``hold``: a command."""

    hold: int


class RateTokenRequested(Event, tag="rate_token_requested", frozen=True, kw_only=True):
    """Workflow code asked for a token of a rate-limited pair (``rate_limit``): a command.

    The world settles it in the commit: it takes the pair's next token (at most
    ``limit`` per sliding window of ``per`` seconds, in arrival order) and records
    its time in ``token_at``; the workflow then waits until then with a durable timer.
    Replay answers from the recorded ``token_at``, so a token is taken once.
    """

    number: int
    key: str
    value: StoredValue
    limit: int
    per: float
    token_at: datetime | None = None
    refused: str | None = None
    """Set by the world instead of ``token_at`` when the pair is held at another rate (the
    reason): no token is taken and ``rate_limit`` raises ``ValueError``."""


class UpdateReceived(Event, tag="update_received", frozen=True, kw_only=True):
    """An update arrived from outside (``Run.update``): delivered to the body's
    ``receive_updates(name)`` in log order. The world appends it once per
    ``update_id`` and run."""

    name: str
    update_id: str
    payload: bytes


class UpdateReplied(Event, tag="update_replied", frozen=True, kw_only=True):
    """Workflow code answered update ``update_id`` with ``result``: a command. The
    first answer in the log after the update is the one every caller gets."""

    update_id: str
    result: bytes


class UpdateRejected(Event, tag="update_rejected", frozen=True, kw_only=True):
    """Workflow code refused update ``update_id`` with ``message``: a command
    (callers get ``UpdateRejectedError``)."""

    update_id: str
    message: str


CommandEvent: TypeAlias = (
    StepCreated
    | WaitCreated
    | AttributeSet
    | AttributeConflict
    | HookCreated
    | HookConflict
    | ChildStarted
    | ChildConflict
    | PatchMarker
    | StreamWritten
    | StreamClosed
    | SlotRequested
    | RateTokenRequested
    | UpdateReplied
    | UpdateRejected
    | SlotReleased
    | RunCompleted
    | RunFailed
    | RunContinued
    | RunCancelled
)
"""What the workflow body issues: on replay each is matched by position against the
body's calls (``rfcs/0001-execution-model.md``). ``AttributeSet`` and
``AttributeConflict`` are commands when run-scoped; a step attempt's (``step`` set)
are that attempt's own record, which the body never sees."""

ExternalEvent: TypeAlias = (
    RunCreated
    | RunStarted
    | RunCancelRequested
    | StepStarted
    | StepCompleted
    | StepRetrying
    | StepFailed
    | StepDiscarded
    | WaitCompleted
    | HookReceived
    | ChildClosed
    | SlotAcquired
    | RunReopened
    | RunForked
    | UpdateReceived
)
"""What happens to a run (step workers, timers, the outside world, the world's own
bookkeeping): delivered to the body one at a time, in log order."""

EventKind: TypeAlias = CommandEvent | ExternalEvent
"""Every concrete event type: decode a stored event with this union. Each kind is
in exactly one of the two families, so a new kind is classified where it is added."""
