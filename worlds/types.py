"""The vocabulary every world speaks: run records, work items and the event log.

This module imports nothing from the project. Worlds, the engine and the client
all build on it, which keeps the dependency graph a tree: ``workflow`` depends
on ``worlds``, never the other way round.

The event log's own vocabulary (attribute values, statuses, errors, events)
lives in ``worlds.events`` and is re-exported here, so ``worlds.types`` stays
the one place to import from.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, TypeAlias

import msgspec

from worlds.events import (
    EPOCH,
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    ChildClosed,
    ChildConflict,
    ChildStarted,
    ErrorInfo,
    Event,
    EventKind,
    FailureHandler,
    HookConflict,
    HookCreated,
    HookReceived,
    PatchMarker,
    RateTokenRequested,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunForked,
    RunReopened,
    RunStarted,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StoredValue,
    StreamClosed,
    StreamWritten,
    UpdateReceived,
    UpdateRejected,
    UpdateReplied,
    WaitCompleted,
    WaitCreated,
    utcnow,
)

__all__ = [
    "EPOCH",
    "SLOT_HISTORY_KEEP",
    "AttributeConflict",
    "AttributeSet",
    "AttributeValue",
    "ChildClosed",
    "ChildConflict",
    "ChildStarted",
    "Claim",
    "ClaimConflict",
    "CommitRequest",
    "CommitResult",
    "ConflictRule",
    "CreateRunRequest",
    "CreateRunResult",
    "Debounce",
    "DeploymentRecord",
    "ErrorInfo",
    "Event",
    "EventKind",
    "FailureHandler",
    "FirstTask",
    "HookConflict",
    "HookCreated",
    "HookDelivery",
    "HookReceived",
    "HookRecord",
    "HookStartResult",
    "KeyLimit",
    "Limit",
    "ListedReopen",
    "NewWorkItem",
    "OnFull",
    "PatchMarker",
    "Pin",
    "Rate",
    "RateTokenRequested",
    "ReuseRule",
    "ReuseWindow",
    "RunCancelRequested",
    "RunCancelled",
    "RunCompleted",
    "RunContinued",
    "RunCreated",
    "RunFailed",
    "RunForked",
    "RunRecord",
    "RunReopened",
    "RunStarted",
    "RunStatus",
    "ScheduleFire",
    "ScheduleFireTime",
    "ScheduleLease",
    "ScheduleRecord",
    "Slot",
    "SlotAcquired",
    "SlotReleased",
    "SlotRequested",
    "SlotSample",
    "StartPolicy",
    "StepCompleted",
    "StepCreated",
    "StepDiscarded",
    "StepFailed",
    "StepRetrying",
    "StepStarted",
    "StoredValue",
    "StreamChunk",
    "StreamClosed",
    "StreamWritten",
    "UpdateDelivery",
    "UpdateOutcome",
    "UpdateReceived",
    "UpdateRejected",
    "UpdateReplied",
    "UpdateStartResult",
    "UpdateState",
    "WaitCompleted",
    "WaitCreated",
    "WorkItem",
    "WorkKind",
    "WorkerInfo",
    "WorkerRecord",
    "WorkerStatus",
    "utcnow",
]

# --------------------------------------------------------------------------- records


Pin: TypeAlias = Literal["run", "latest"]
"""Where a run of a workflow goes on once a build ran its first task (RFC 0025):
``run``: on workers of that build only; ``latest``: on the newest build at each task."""


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A run as the world stores it (the log holds the details)."""

    id: str
    workflow: str
    status: RunStatus
    created_at: datetime
    started_at: datetime | None = None
    closed_at: datetime | None = None
    attributes: dict[str, StoredValue] = {}
    result: bytes | None = None
    error: ErrorInfo | None = None
    last_seq: int = 0
    build_id: str | None = None
    """The build whose worker ran the run's first task (``Worker(build_id=...)``);
    ``None`` when that worker had none: the run is not pinned (RFC 0025)."""
    pin: Pin | None = None
    """Where the run's next tasks may run, from its workflow's ``pin`` in that build:
    ``run`` on workers of ``build_id`` only, ``latest`` on the newest build."""
    admitted_at: datetime | None = None
    """A rate-limited run's admission: the time its tokens let it start (``RateLimited``,
    moved with them). Its ``RunStarted`` is recorded at this time, and so is
    ``started_at``, whenever a worker began it (RFC 0008, section 6)."""


class HookRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A live hook: ``token`` resumes hook number ``hook`` of run ``run_id``.

    ``hook`` is 0 while the token waits, after a continue-as-new moved it to
    ``run_id``, for that run to create a hook with it.
    """

    token: str
    run_id: str
    hook: int
    attributes: dict[str, StoredValue] = {}
    created_at: datetime


class ReuseWindow(msgspec.Struct, frozen=True, kw_only=True):
    """When a unique claim frees itself after its holder closed.

    A holder closing with a status in ``release_on`` releases the pair in the
    same operation; otherwise, with ``ttl``, the claim lapses ``ttl`` seconds
    after the holder closed (``Claim.lapses_at``) and the pair is free from
    then on. Without either, the claim stays with its holder (and, once the
    holder is pruned, with its tombstone). Continue-as-new keeps the window.
    """

    ttl: float | None = None
    release_on: frozenset[RunStatus] = frozenset()


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """Who holds a unique (key, value) pair, and the claim's fencing token.

    A step claim (``set_attribute(..., unique=True)`` inside a step) has
    ``step`` set, with the ``attempt`` that claimed it last; the run's own
    claims have ``step`` None. ``ttl`` and ``release_on`` are its reuse window;
    ``lapses_at`` is set once the holder closed (a claim past it is free and
    no longer listed). ``pruned_status`` is set on a tombstone: the holder run
    was pruned, it had closed with that status, and the claim still refuses
    others (``prune_runs(..., release_claims=False)``).
    """

    key: str
    value: StoredValue
    run_id: str
    generation: int
    step: int | None = None
    attempt: int | None = None
    ttl: float | None = None
    release_on: frozenset[RunStatus] = frozenset()
    lapses_at: datetime | None = None
    pruned_status: RunStatus | None = None


class ClaimConflict(msgspec.Struct, frozen=True, kw_only=True):
    """A unique pair was already held by ``holder_run_id``; nothing was written.

    ``holder_status`` is the holder's status when the world decided;
    ``holder_pruned`` says the holder is a tombstone (pruned, its final status
    in ``holder_status``). With
    ``limit`` set the pair is a limited one (``CreateRunRequest.limits``) whose
    ``limit`` slots were all taken, ``holder_run_id`` being one of their holders.
    """

    key: str
    value: StoredValue
    holder_run_id: str
    holder_status: RunStatus | None = None
    limit: int | None = None
    holder_pruned: bool = False
    retry_after: float | None = None
    """Set when a rate-limited pair (``CreateRunRequest.rates``) refused the start:
    seconds until a start would be admitted; ``holder_run_id`` is the run whose
    token leaves the window then."""


OnFull: TypeAlias = Literal["queue", "fail"]


class Limit(msgspec.Struct, frozen=True, kw_only=True):
    """At most ``limit`` open runs hold a slot of one (key, value) pair.

    When every slot is taken, ``on_full="queue"`` creates the run pending and
    waiting (no work item) until it is promoted, first in first out per pair;
    ``on_full="fail"`` refuses the start (``CreateRunResult.conflict``).
    """

    limit: int
    on_full: OnFull = "queue"
    burst: int = 0
    """Slots the pair may take above ``limit`` while its key's limit
    (``World.set_key_limit``) has free capacity; unused when the key has none."""


class KeyLimit(msgspec.Struct, frozen=True, kw_only=True):
    """A cap on the open runs that hold a slot (``Limit``) of any value of ``key``.

    A run needs a slot of its pair and one of the key. When key slots free, the
    values waiting are served weighted round-robin: ``weights`` pairs a value with
    its weight (1 when absent). ``held`` is how many slots of the key are held
    when the world read it (0 in what a caller stores).
    """

    key: str
    limit: int
    weights: list[tuple[StoredValue, float]] = []
    held: int = 0


class Rate(msgspec.Struct, frozen=True, kw_only=True):
    """At most ``limit`` starts of runs holding one (key, value) pair per sliding
    window of ``per`` seconds.

    A start takes a token of the pair: at once when the window has room and no
    token is reserved ahead of it, else (``on_full="queue"``) the next time the
    window allows, in arrival order, the run pending until then; ``on_full="fail"``
    refuses the start (``ClaimConflict.retry_after``).
    """

    limit: int
    per: float
    on_full: OnFull = "queue"


class Slot(msgspec.Struct, frozen=True, kw_only=True):
    """A run's place at a limited (key, value) pair: holding a slot, or waiting.

    ``position`` orders a pair's rows by arrival (first in, first out); the
    waiters of a pair are promoted in that order. ``limit`` is the one the run
    asked for.
    """

    key: str
    value: StoredValue
    run_id: str
    limit: int
    holding: bool
    position: int
    hold: int = 0
    """0 for a slot taken at start (``Limited``); -1 for a reopened or forked run
    waiting to take its slots again; else the run's ``hold`` number."""
    priority: int = 0
    """Waiters are promoted lowest ``priority`` first, then by ``position``."""
    burst: int = 0
    """Slots above ``limit`` the pair may take while its key limit has room."""


SLOT_HISTORY_KEEP = 2 * 86400.0
"""Seconds of slot history ``World.prune_slot_history`` keeps by default: the
longest chart window (a day), and a day more."""


class SlotSample(msgspec.Struct, frozen=True, kw_only=True):
    """One minute of a limited (key, value) pair's history (``World.slot_history``).

    A world records a sample in every minute the pair's rows change, inside the
    transaction that changes them: ``holders`` and ``waiters`` as that minute
    left them, and the most of each it saw (``peak_holders``, ``peak_waiters``).
    Between two samples the pair stood as the earlier one left it.
    """

    key: str
    ivalue: str
    """The value as the world indexes it (``worlds.semantics.index_value``)."""
    minute: datetime
    """The minute's start, UTC."""
    holders: int
    waiters: int
    peak_holders: int
    peak_waiters: int


WorkKind: TypeAlias = Literal["workflow", "step", "timer"]


class NewWorkItem(msgspec.Struct, frozen=True, kw_only=True):
    """Work to enqueue in a commit.

    A ``workflow`` item wakes the run's workflow; there is at most one per run,
    and enqueueing another merges into it; its ``name`` is ignored (the world
    uses the run's workflow name). A ``step`` item runs one attempt. A
    ``timer`` item fires wait number ``number`` at ``available_at``.
    ``lease`` asks the world to lease the new item to the committing worker at
    once (eager execution); the leased items come back in ``CommitResult``.
    """

    kind: WorkKind
    name: str = ""
    number: int = 0
    attempt: int = 1
    payload: bytes = b""
    available_at: datetime | None = None
    lease: bool = False


class WorkItem(msgspec.Struct, frozen=True, kw_only=True):
    """A leased unit of work: only the holder of ``token`` may complete it."""

    id: str
    run_id: str
    kind: WorkKind
    name: str
    number: int
    attempt: int
    payload: bytes
    token: int
    lease_expires_at: datetime


ConflictRule: TypeAlias = Literal["fail", "use_existing", "terminate_existing"]
ReuseRule: TypeAlias = Literal["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]


class StartPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """What ``create_run`` does when the unique attribute ``key`` is already held.

    If the holder is open (pending or running): ``fail`` and ``use_existing``
    refuse (the result names the holder); ``terminate_existing`` cancels the
    holder and takes its claim over. If the holder is closed:
    ``allow_duplicate`` takes the claim over; ``allow_duplicate_failed_only``
    takes it over only from a failed or cancelled holder; ``reject_duplicate``
    refuses. A takeover bumps the claim's generation, all in one transaction.
    """

    key: str
    conflict: ConflictRule = "fail"
    reuse: ReuseRule = "allow_duplicate"


class FirstTask(msgspec.Struct, frozen=True, kw_only=True):
    """A new run's first workflow task, run before the run exists (see
    ``CreateRunRequest.first``): its events, the work it schedules, and the
    time its ``RunCreated`` and events carry (from ``World.now``)."""

    events: tuple[EventKind, ...]
    schedule: tuple[NewWorkItem, ...] = ()
    at: datetime


class Debounce(msgspec.Struct, frozen=True, kw_only=True):
    """``create_run`` debounces on the unique attribute ``key``.

    If the pair's holder is pending and was never handed to a worker (its log
    is just ``RunCreated``), its ``RunCreated`` takes the request's arguments
    and its start moves to ``min(now + delay, created_at + max_delay)``, and
    nothing else is written. Otherwise the request's run is created delayed
    by ``min(delay, max_delay)`` and takes the pair over (one generation up;
    a holder still running keeps running). Seconds, by the world's clock.
    """

    key: str
    delay: float
    max_delay: float


class CreateRunRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything ``World.create_run`` writes in one transaction.

    ``unique`` names the keys of ``attributes`` that are claimed across the
    world; ``policy`` (whose key must be in ``unique``) may take one over.
    With ``timeout_at``, the world also enqueues the run's deadline timer
    (``RUN_DEADLINE_TIMER``) due then. With ``lease_to`` (a worker id: the run
    is started in a process whose worker runs it), the world may lease the
    run's workflow item to that worker for ``lease_seconds`` in the same
    transaction and return it as ``CreateRunResult.leased``, so no worker has
    to find it by polling; a world that does not stays correct by enqueueing
    it as usual.

    With ``first`` (and ``lease_to``), the worker has already run the
    workflow's first task against the ``RunCreated`` it will have: the world
    stamps ``RunCreated`` and the task's events with ``first.at``, applies the
    task as a ``commit`` without a lease would (its step items leased to
    ``lease_to`` when they ask), enqueues no workflow item, and returns the
    task's ``CommitResult`` as ``CreateRunResult.first``: start and first task
    in one transaction. A world that does not do this returns no ``first``
    and enqueues the workflow item as usual (the worker then runs the task
    again, from the log). A request with ``limits``, ``start_at`` or
    ``debounce`` is never run ahead: worlds ignore its ``lease_to`` and ``first``.

    ``limits`` names keys of ``attributes`` (not unique ones) whose pair admits
    a bounded number of open runs (see ``Limit``): the run takes a slot of
    every such pair at once, or, when one is full, waits in all of them (no
    slot held, no work item) until the world promotes it when slots free; a
    full ``on_full="fail"`` pair refuses the start instead. ``start_at``
    delays the run's first workflow work item until then. ``windows`` gives
    unique keys a ``ReuseWindow``.
    """

    run_id: str
    workflow: str
    args: bytes
    attributes: dict[str, StoredValue] = {}
    unique: frozenset[str] = frozenset()
    policy: StartPolicy | None = None
    timeout_at: datetime | None = None
    lease_to: str | None = None
    lease_seconds: float = 30.0
    first: FirstTask | None = None
    limits: dict[str, Limit] = {}
    start_at: datetime | None = None
    windows: dict[str, ReuseWindow] = {}
    debounce: Debounce | None = None
    rates: dict[str, Rate] = {}
    """Keys of ``attributes`` whose pair admits at most ``Rate.limit`` starts per
    window (see ``Rate``): the run's workflow item is due when its token is."""
    priority: int = 0
    """Among runs waiting for the same slots or tokens, the lowest number goes first
    (first in, first out within a number)."""


class CreateRunResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``create_run``: the new run, or the claim that refused it.

    ``superseded_run_id`` names the run a ``terminate_existing`` takeover
    cancelled, if any; ``leased`` the workflow item leased to
    ``CreateRunRequest.lease_to``, if the world did so. ``debounced`` says a
    ``Debounce`` updated the pending holder ``run`` instead of creating a run.
    """

    run: RunRecord | None = None
    conflict: ClaimConflict | None = None
    superseded_run_id: str | None = None
    leased: WorkItem | None = None
    first: CommitResult | None = None
    debounced: bool = False


class StreamChunk(msgspec.Struct, frozen=True, kw_only=True):
    """One chunk of a run's stream: ``offset`` counts from 0, densely, per stream."""

    offset: int
    data: bytes
    at: datetime


class HookDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """A payload for hook ``token``, exactly once per non-None ``resume_id``."""

    token: str
    payload: bytes
    resume_id: str | None = None


class HookStartResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``World.start_or_resume_hook``.

    ``run_id`` is the run the payload went to (or went to before, for a
    repeated ``resume_id``); ``created`` says whether this call created it.
    With ``hook_holder`` set nothing was written: the token is held by that
    other run. ``run`` is the new run's record when ``created``.
    """

    run_id: str
    created: bool = False
    hook_holder: str | None = None
    run: RunRecord | None = None


class UpdateDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """An update for a run's ``receive_updates(name)``, accepted once per ``update_id``."""

    name: str
    update_id: str
    payload: bytes


UpdateState: TypeAlias = Literal["pending", "replied", "rejected", "failed"]
"""Where an update stands: waiting for the body's answer, answered, refused by the
body, or failed (the run closed, or was closed when the update came)."""


class ListedReopen(msgspec.Struct, frozen=True, kw_only=True):
    """What ``World.reopen_listed`` did to one run.

    ``status`` is the run's status after; ``reopened`` says it is reopened by the
    call's ``by`` (by this call, or by an earlier one: never twice); ``refused``
    says why it could not go on (another run holds one of its hook tokens, or a
    pair of it is held with another limit), and nothing was written for it.
    """

    status: RunStatus
    reopened: bool = False
    refused: str | None = None


class UpdateOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """An update's answer as the run's log records it (``World.update_outcome``).

    ``result`` is the reply (``replied``); ``message`` the body's reason
    (``rejected``) or why the update failed (``failed``).
    """

    run_id: str
    state: UpdateState
    result: bytes | None = None
    message: str | None = None


class UpdateStartResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of ``World.update_with_start``: the run the update went to (or
    went to before, for a repeated update id), whether this call created it, its
    record when it did, and the update's outcome so far (usually ``pending``).
    With ``conflict`` set nothing was written: a unique pair refused the new run
    (``run_id`` is then its holder and the outcome ``failed``)."""

    run_id: str
    outcome: UpdateOutcome
    created: bool = False
    run: RunRecord | None = None
    conflict: ClaimConflict | None = None


class CommitRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One atomic change to a run made by the worker holding ``lease``.

    The world checks that the run is not closed and that ``lease`` (when given)
    is an item of this run still held under its token, then appends ``events``
    in order, applies the state each implies (status, attributes, claims),
    enqueues ``schedule`` and, with ``ack``, finishes the leased item.

    A ``HookCreated`` claims its token for as long as the run is open; a
    token another open run's hook holds makes it a ``HookConflict`` instead.
    A token this run holds unbound (hook 0, moved here by continue-as-new) is
    bound to the new hook number. Closing a run disposes of its hooks and frees
    their tokens, except that ``RunContinued`` moves them (see there).

    A unique ``AttributeSet`` is a claim owned by (run, step): the run itself
    when ``step`` is None. A pair held by another owner — another run, or
    another step of this run, or the run versus one of its steps — is appended
    as an ``AttributeConflict`` naming the holder run instead; attempts of one
    step share ownership, so a retry takes its predecessor's claim. If the run
    is closed, or the lease was lost, and ``discard`` is given, only
    ``discard`` is appended (a late step result) and ``ok`` is False; under a
    lost lease not even that when the log already holds an outcome or a
    discard of that attempt (the retry of a commit that had landed).

    ``expect_seq`` makes the commit conditional (one transaction per step: a
    worker that fed a step's outcome straight into its cached workflow commits
    the outcome with the workflow's next commands): it is applied only if
    every event after number ``expect_seq`` is a step attempt's own record
    (``StepStarted``, ``StepRetrying``, ``StepDiscarded``, or a step's
    ``AttributeSet``/``AttributeConflict``), which the workflow never sees,
    and, with ``at``, neither they nor event ``expect_seq`` is later than
    ``at``. Otherwise nothing is
    written and the result is ``stale``. ``at`` stamps the events with that
    time instead of the world's clock (the time the workflow already saw; it
    comes from ``World.now``).
    """

    run_id: str
    worker_id: str
    lease: WorkItem | None = None
    events: tuple[EventKind, ...] = ()
    schedule: tuple[NewWorkItem, ...] = ()
    ack: bool = True
    discard: StepDiscarded | None = None
    lease_seconds: float = 30.0
    expect_seq: int | None = None
    at: datetime | None = None


class CommitResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a commit did.

    ``ok`` is False when nothing was written: the lease was lost (``lease_lost``)
    or the run was closed (``status`` says how). ``events`` are the request's
    events as appended, in request order, with their sequence numbers (the
    ``StepStarted`` of an eager lease is in the log but not here); ``leased``
    the items leased to the committing worker. With ``lease_lost``,
    ``lease_holder`` names the worker that holds the item's lease now (``None``
    when nobody does: the item finished or went with its run). ``stale``: a
    conditional commit (``CommitRequest.expect_seq``) found events the
    committer had not seen, and wrote nothing.
    """

    ok: bool
    status: RunStatus
    events: tuple[EventKind, ...] = ()
    leased: tuple[WorkItem, ...] = ()
    lease_lost: bool = False
    lease_holder: str | None = None
    stale: bool = False


class ScheduleRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A schedule as a world stores it (see ``rfcs/0009-schedules.md``).

    The world does not interpret ``spec`` (the SDK's encoding of the cron or
    interval, the arguments and the overlap rule); it keeps the schedule's
    state and hands it to one worker at a time when ``wake_at`` has passed.
    ``next_fire_at`` is the next fire time not yet handled (``None``: no more
    fires); ``buffered_at`` a fire waiting for the open run to close
    (``BUFFER_ONE``). ``version`` grows on every update: ``update_schedule``
    writes only over the version it was read at.
    """

    id: str
    workflow: str
    spec: bytes
    paused: bool = False
    note: str | None = None
    next_fire_at: datetime | None = None
    buffered_at: datetime | None = None
    wake_at: datetime | None = None
    version: int = 0
    created_at: datetime = EPOCH
    updated_at: datetime = EPOCH


class ScheduleFireTime(msgspec.Struct, frozen=True, kw_only=True):
    """One fire of a schedule's round: its fire time and the start of its run."""

    at: datetime
    request: CreateRunRequest


class ScheduleFire(msgspec.Struct, frozen=True, kw_only=True):
    """One leased schedule's round, as ``World.fire_schedules`` stores it.

    The worker decides the fire times (the world does not read ``spec``);
    the world starts them and stores the schedule's new state, in one
    transaction for a whole batch of schedules. ``record`` is the schedule as
    leased: its ``version`` is compared, and a schedule updated (or deleted)
    since is left alone, none of its fires started. ``buffered`` is the
    start of the fire that waited behind an open run (``record.buffered_at``),
    tried first; ``fires`` the due fires in time order. A fire refused by
    the overlap rule (its pair held by an open run) is dropped, or, with
    ``buffer``, becomes the buffered fire unless one is buffered already.
    The new state: ``next_fire_at`` as given, the buffered fire that remains,
    and a wake time of ``next_fire_at``, no later than ``recheck_at`` while a
    fire is buffered.
    """

    record: ScheduleRecord
    fires: tuple[ScheduleFireTime, ...] = ()
    buffered: CreateRunRequest | None = None
    buffer: bool = False
    next_fire_at: datetime | None = None
    recheck_at: datetime | None = None


class ScheduleLease(msgspec.Struct, frozen=True, kw_only=True):
    """What ``lease_schedules`` gives a worker.

    ``schedules`` are the due ones now leased to it; ``now`` is the world's
    clock when it leased them; ``next_wake_at`` is the earliest ``wake_at`` of
    the unpaused schedules it did not lease (``None``: none), so the worker
    can sleep until then.
    """

    now: datetime
    schedules: tuple[ScheduleRecord, ...] = ()
    next_wake_at: datetime | None = None


WorkerStatus: TypeAlias = Literal["live", "silent", "dead", "stopped"]
"""A registered worker as its world sees it (``worlds._rules.liveness``): ``live``
while it heartbeats, ``silent`` when its heartbeat is older than its window by
the world's clock but no other worker was seen beating for that window after it
(a world-wide stall, or nobody left to tell: its items stay its own), ``dead``
once the world declared it so (its heartbeat went stale while other workers were
seen beating for a whole window; its items are taken over and it is fenced),
``stopped`` once it said goodbye."""


class WorkerInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker tells its world when it registers (RFC 0001, worker liveness).

    ``liveness_seconds`` is the window: a worker whose heartbeat is older than
    that, while the world has been seen reachable by other workers for that
    long, is dead. It heartbeats well within it (a few times per window).
    ``workflows`` names the workflows the worker serves with each one's ``Pin``;
    with a ``build_id`` the world records them for that build (RFC 0025) and
    refuses a later worker of the same build whose names differ.
    """

    id: str
    host: str
    pid: int
    build_id: str | None = None
    liveness_seconds: float = 10.0
    workflows: dict[str, Pin] = {}


class DeploymentRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A build id as ``World.list_deployments`` returns it (RFC 0025).

    ``open_runs`` counts the open runs whose first task ran on the build (and that
    did not move since); ``pinned_runs`` those of them that still need it: pinned
    to it (``pin="run"``), or any of them while it is the newest build.
    ``live_workers`` counts its registered workers that are neither stopped nor
    dead; ``newest``: new runs and ``pin="latest"`` runs go to it.
    """

    build_id: str
    workflows: tuple[str, ...]
    registered_at: datetime
    open_runs: int
    pinned_runs: int
    live_workers: int
    newest: bool


class WorkerRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A registered worker as ``World.list_workers`` returns it.

    ``status`` is computed by the world's clock when the list was read;
    ``in_flight`` is the count the worker reported with its last heartbeat.
    """

    id: str
    host: str
    pid: int
    build_id: str | None
    liveness_seconds: float
    started_at: datetime
    last_heartbeat_at: datetime
    in_flight: int
    status: WorkerStatus
