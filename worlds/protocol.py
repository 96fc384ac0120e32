"""The ``World`` protocol: everything the runtime asks of a storage backend.

A world is small on purpose. It stores runs, their event logs, attributes and
claims, and a queue of leased work. Every method that writes is one atomic
operation: a world either performs all of it or none of it. The engine never
reads, decides and writes in separate calls where a race could slip in.

``World`` is the intersection of nine capability protocols, each lining up
with classes of the conformance kit: ``Lifecycle``, ``Runs``, ``Work``,
``Liveness``, ``Hooks``, ``Updates``, ``Streams``, ``Index``, ``Schedules``,
``Transactions`` and ``Archive``. A third-party world
implements ``World`` (structural typing, no base class to inherit) and proves
itself with ``worlds.testing``; a world that wraps another subclasses
``worlds.wrapper.WorldWrapper``. See ``rfcs/0002-world-protocol.md`` for each
operation's atomicity and failure modes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Protocol, Self, runtime_checkable

from worlds.archive import DumpRow
from worlds.query import CountField, RunCount, RunPage, RunQuery
from worlds.types import (
    SLOT_HISTORY_KEEP,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    DeploymentRecord,
    EventKind,
    HookDelivery,
    HookRecord,
    HookStartResult,
    KeyLimit,
    ListedReopen,
    RunRecord,
    RunStatus,
    ScheduleFire,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    SlotSample,
    StreamChunk,
    UpdateDelivery,
    UpdateOutcome,
    UpdateStartResult,
    WorkerInfo,
    WorkerRecord,
    WorkItem,
)

__all__ = [
    "ISOLATION_LEVELS",
    "PROTOCOL_VERSION",
    "RUNS_TOPIC",
    "SCHEDULE_TOPIC",
    "WORK_TOPIC",
    "Archive",
    "Hooks",
    "Index",
    "Isolation",
    "Lifecycle",
    "Liveness",
    "OpenTransaction",
    "Runs",
    "Schedules",
    "Streams",
    "Transactions",
    "Updates",
    "Work",
    "World",
    "is_run_topic",
    "is_work_topic",
    "run_topic",
    "work_topic",
]

PROTOCOL_VERSION = 1
"""The protocol revision this runtime speaks; a world declares the one it implements."""

WORK_TOPIC = "work"
"""The ``wait`` topic signalled when work may have become available: a wait on it
ends on this topic and on every ``work_topic``."""

SCHEDULE_TOPIC = "schedules"
"""The ``wait`` topic signalled when a schedule was created or updated."""


RUNS_TOPIC = "runs"
"""The ``wait`` topic signalled along with every ``run_topic``: one subscription
that hears any run of the world close, for a process waiting on many runs
(``Run.result``). A world that does not signal it makes such waiters notice a
closed run only at their poll interval."""

_RUN_TOPIC_PREFIX = "run:"


def run_topic(run_id: str) -> str:
    """The ``wait`` topic signalled when run ``run_id`` may have closed."""
    return f"{_RUN_TOPIC_PREFIX}{run_id}"


def is_run_topic(topic: str) -> bool:
    """Whether ``topic`` is some run's ``run_topic`` (so ``RUNS_TOPIC`` goes with it)."""
    return topic.startswith(_RUN_TOPIC_PREFIX)


_WORK_TOPIC_PREFIX = f"{WORK_TOPIC}:"


def work_topic(name: str) -> str:
    """The topic a world signals when an item named ``name`` may have become due.

    Nobody waits on it: it wakes the waiters on ``WORK_TOPIC``, but a poll for
    other names that found nothing stays answered from memory (``wait_idle``),
    so work of one workflow costs no query of the workers that do not serve
    it. ``WORK_TOPIC`` itself still says "any name may have work"."""
    return f"{_WORK_TOPIC_PREFIX}{name}"


def is_work_topic(topic: str) -> bool:
    """Whether ``topic`` is some name's ``work_topic`` (it wakes ``WORK_TOPIC`` waiters)."""
    return topic.startswith(_WORK_TOPIC_PREFIX)


@runtime_checkable
class Lifecycle(Protocol):
    """What every world has: its URL and protocol version, ``async with``, closing,
    migrating and describing itself. Checked by ``RunsConformance`` (the version,
    ``info``) and by every class of the kit, which opens and closes worlds.
    """

    protocol_version: int

    url: str

    gathers_writes: bool
    """Whether the world gathers the writes of one event-loop turn into one
    transaction itself (SQLite): a worker then sends each commit at once, since
    gathering them for ``commit_many`` too would cost each commit a second turn.
    ``False``: a worker gathers a turn's commits into one ``commit_many``."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def close(self) -> None:
        """Release connections at once. Calls then raise ``WorldClosedError``
        until the world is entered again: ``async with world:`` opens a closed
        world, entries nest and repeat, and the last exit closes it."""
        ...

    async def migrate(self) -> int:
        """Bring the storage schema up to date and return its version.

        Worlds also migrate on first use; this is the explicit form behind
        ``wf world migrate``. A world with no schema returns 0.
        """
        ...

    async def info(self) -> dict[str, str | int]:
        """Facts for ``wf world info``: at least ``scheme``, ``schema_version`` and a
        count of runs per status under ``runs.<status>`` keys."""
        ...

    async def setting(self, key: str, value: str | None = None) -> str | None:
        """The world's setting ``key``: the value recorded for it, or ``None``.

        Given ``value`` while none is recorded, records it first, atomically: a
        setting is written once and the first value stays (a different
        ``value`` later is not recorded; the caller compares). Settings say
        what the world was created with, such as the payload codec
        (``worlds.codec``).
        """
        ...

    async def put_setting(self, key: str, value: str | None) -> None:
        """Record ``value`` for the setting ``key``, replacing any (``None``: remove it).

        For settings an operator changes (the retention windows,
        ``workflow.set_retention``), unlike the write-once ones ``setting``
        records; ``setting(key)`` reads either kind.
        """
        ...


@runtime_checkable
class Runs(Protocol):
    """Runs and their logs: creating (claims, policies, slots: RFCs 0003, 0004,
    0008), committing, cancelling, reopening, forking, reading and pruning them.
    Checked by ``RunsConformance``, ``ClaimsConformance``, ``TakeoverConformance``,
    ``CancelConformance``, ``ChildrenConformance``, ``ReopenConformance``,
    ``PruneConformance``, ``ReuseConformance``, ``DebounceConformance``,
    ``SlotsConformance``, ``HoldConformance``, ``BatchCommitConformance``,
    ``ConditionalCommitConformance``, ``ValueConformance`` and ``ModelConformance``.
    """

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """Create a pending run, its ``RunCreated`` event, its attributes and claims,
        and a workflow work item, atomically.

        Limited pairs (``request.limits``) follow ``CreateRunRequest``: the run
        takes a slot of each, or waits without a work item, or (a full
        ``on_full="fail"`` pair) nothing is written and the result carries the
        conflict. When a run closes (whatever the outcome) the world drops its
        slots and places in line and, in that same operation, promotes the
        waiters that frees (``worlds.semantics`` rules), giving each a workflow
        work item; continue-as-new moves the slots to the next run.

        If any unique pair is held (and ``request.policy`` does not take it
        over), nothing is written and the result carries the conflict with the
        holder's status. A duplicate ``run_id``, or a unique key missing from
        the attributes, raises ``ValueError``.
        """
        ...

    async def commit(self, request: CommitRequest) -> CommitResult:
        """Apply a ``CommitRequest`` atomically (its docstring gives the rules)."""
        ...

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        """Apply each request as ``commit`` would, in order, and report each outcome
        separately: its result, or the exception ``commit`` would have raised for
        it (then nothing of that request is written). A request's outcome never
        depends on whether another in the batch failed.

        Group commit: a world makes the whole batch durable at once where it can
        (one transaction and one fsync: memory, SQLite) and returns only once all
        of it is durable. An exception raised by the call itself (the world is
        unavailable) leaves every outcome unknown: each request may have been
        applied, and is retried like a ``commit`` that raised (a commit under a
        lease never applies twice). ``worlds._rules.batches`` has the rules.
        """
        ...

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """Close an open run as cancelled and drop its pending work, atomically.

        A closed run is returned unchanged; an unknown run gives ``None``.
        """
        ...

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """Ask a run to stop, giving its body ``grace_seconds`` to clean up, atomically.

        A pending run (its body never ran) is cancelled at once, as by
        ``cancel_run``. A running one gets ``RunCancelRequested(reason,
        deadline)`` (status ``cancelling``); its queued step and timer items are
        dropped, each step attempt in flight gets a ``StepDiscarded`` (its lease
        is lost, so its worker stops it), a workflow item wakes the body, and a
        timer item numbered ``CANCEL_DEADLINE_TIMER`` is due at the deadline. A
        cancelling or closed run is returned unchanged; an unknown run gives
        ``None``.
        """
        ...

    async def cancel_listed(
        self, run_ids: Sequence[str], reason: str | None, grace_seconds: float | None
    ) -> dict[str, RunStatus | None]:
        """Cancel each of ``run_ids`` as ``request_cancel`` would (``grace_seconds``
        None: as ``cancel_run``), all in one atomic operation; each run's status
        after (``None``: unknown). For bulk actions: one transaction for many runs."""
        ...

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        """Reopen a failed or cancelled run, atomically: append ``RunReopened`` and
        queue what it needs (``worlds._rules.reopen.plan_reopen``). The run holds its
        hooks' tokens again and takes its slots again (``worlds._rules.slots.retake``):
        while one is not free it is returned ``pending``, in line, its work held
        back until promoted. A run in another status is returned unchanged; an
        unknown run gives ``None``; ``ValueError`` (nothing written) when another
        run holds one of its tokens or a pair is held with another limit."""
        ...

    async def reopen_listed(
        self, run_ids: Sequence[str], by: str
    ) -> dict[str, ListedReopen | None]:
        """Reopen each of ``run_ids`` as ``reopen_run`` would, all in one atomic
        operation, each run on its own: one refused (a token or a pair taken) is
        reported and left unchanged, and the others go on. A run whose log
        already records a ``RunReopened`` by ``by`` is left as it is and reported
        reopened, so a bulk retry (which names itself in ``by``) that runs again
        never reopens a run twice. What was done to each run (``None``: unknown).
        For bulk actions: one transaction for many runs."""
        ...

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        """Create run ``run_id`` as a fork of ``source_run_id`` from its step
        ``from_step`` (``worlds._rules.reopen.plan_fork``), atomically; it holds
        hooks and takes slots as ``reopen_run`` does. ``None`` for an unknown
        source; ``ValueError`` for a step it does not have, a taken id, a token
        another run holds or a pair held with another limit."""
        ...

    async def move_start(self, run_id: str, delay: float | None) -> RunRecord | None:
        """Move a pending run's start, atomically (``worlds._rules.starts``): to now
        (``delay=None``) or ``delay`` seconds from now, by the world's clock, but no
        earlier than its rate-limited pairs' windows allow (its tokens move with it).
        A run waiting for a slot stays in line (``delay=None``). ``None`` for an
        unknown run; ``ValueError`` (nothing written) for a run that started (not
        pending, or a worker began it) or a slot waiter asked to be delayed."""
        ...

    async def set_key_limit(
        self, key: str, limit: int | None, weights: Mapping[Any, float] | None = None
    ) -> KeyLimit | None:
        """Cap the open runs holding a start-time slot (``CreateRunRequest.limits``) of any
        value of ``key`` at ``limit`` (``None``: remove the cap), atomically
        (``worlds._rules.key_limits``): a run then needs a slot of its pair and one of
        the key, and freed key slots go to the waiting values weighted round-robin
        (``weights[value]``, 1 when absent). A raised or removed limit promotes whom it
        admits in the same operation. The limit stored (``None`` once removed);
        ``ValueError``/``TypeError`` (nothing written) for a bad key, limit or weight."""
        ...

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or ``None``."""
        ...

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """The run's events with ``seq > after_seq``, in order."""
        ...

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """Delete up to ``limit`` runs closed before ``closed_before``, atomically.

        Their events, attributes and work go with them. Their unique claims stay
        as tombstones (``Claim.pruned_status``: the holder's id, final status and
        generation), which keep refusing the pair, unless ``release_claims``:
        then they are released. Claims whose ``lapses_at`` passed are released
        too, whoever held them. A released pair keeps its generation, so the
        next claim of it gets a higher one (fencing tokens never go back).
        With ``release_claims`` the tombstones earlier prunes kept are released
        as well (a world prunes no run's claims into a tombstone then). Pinned
        runs (``pin_run``) are passed over. Returns the ids pruned.
        """
        ...

    async def prune_expired(
        self,
        keep: Mapping[RunStatus, float],
        limit: int = 1000,
        *,
        release_claims: bool = False,
    ) -> list[str]:
        """Delete up to ``limit`` runs past their status's retention, atomically.

        A run closed as ``status`` is past it once it closed more than
        ``keep[status]`` seconds ago by the world's clock; statuses missing
        from ``keep`` are kept forever (``worlds._rules.retention``). Claims go
        as in ``prune_runs``. Pinned runs are never pruned. ``ValueError`` for
        an open status or a negative window. Returns the ids pruned.
        """
        ...

    async def prune_listed(
        self, run_ids: Sequence[str], *, release_claims: bool = False
    ) -> list[str]:
        """Delete those of ``run_ids`` that are closed and not pinned, atomically.

        Claims go as in ``prune_runs``. Open, pinned and unknown runs are left
        alone (the caller reads why). Returns the ids pruned, in id order.
        """
        ...

    async def prune_slot_history(self, keep: float = SLOT_HISTORY_KEEP, limit: int = 1000) -> int:
        """Delete up to ``limit`` slot samples (``slot_history``) older than ``keep``
        seconds by the world's clock, atomically; each pair's newest sample stays
        unless it shows the pair empty (it is the level the pair still stands at).
        ``ValueError`` for a negative ``keep``. Returns how many went.
        """
        ...

    async def pin_run(self, run_id: str, pinned: bool) -> RunRecord | None:
        """Pin (``pinned``) or unpin the run, atomically: a pinned run's attributes
        hold ``$pinned = True`` (``worlds.semantics.PIN_KEY``) and no prune deletes
        it. Returns the run as stored now; ``None`` for an unknown run."""
        ...

    async def release_claim(self, key: str, value: AttributeValue) -> Claim | ClaimConflict | None:
        """Release the unique pair (key, value), atomically, if its holder is closed.

        A tombstone, or the claim of a run that has closed, is freed keeping its
        generation (the next holder's is higher); the answer is the claim as it
        was (``pruned_status`` set for a tombstone). A pair held by a pending or
        running run is left alone: the answer is a ``ClaimConflict`` naming it.
        ``None``: nothing held the pair (never claimed, released or lapsed).
        Decided by ``worlds._rules.claims.on_release``.
        """
        ...


@runtime_checkable
class Work(Protocol):
    """The work queue and the world's clock and wake-ups: leasing, renewing and
    releasing work items, ``now`` and ``wait``. Checked by ``WorkConformance``
    and, for worlds shared across hosts, ``ClockConformance``.
    """

    async def lease(
        self,
        worker_id: str,
        *,
        names: Collection[str],
        limit: int,
        lease_seconds: float,
    ) -> list[WorkItem]:
        """Lease up to ``limit`` due items whose name is in ``names``.

        Due means ``available_at`` has passed and the item is not leased, or its
        lease expired. Each lease gets a fresh token; re-leasing a step item
        whose previous lease expired counts a new attempt and the world appends
        ``StepStarted`` for every step attempt it leases.

        Builds (RFC 0025, ``worlds._rules.deployments.may_lease``): a worker
        registered with a build id leases the items of runs pinned to its build,
        of new runs and ``pin="latest"`` runs while its build is the newest; a
        run leased by it the first time (or a ``latest`` run moving to it)
        records its build. A worker without one leases only runs that recorded
        no build.
        """
        ...

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """Extend leases; for each item, False if it is lost or its run closed."""
        ...

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """Give leased items back so another worker can take them at once."""
        ...

    def now(self) -> datetime:
        """The world's current time (aware UTC), as this object stamps events.

        A worker that shows a time to a workflow before the event carrying it
        is stored (``CommitRequest.at``) takes it from here, so events carry
        the world's clock, not the worker's.
        """
        ...

    async def wait(self, topic: str, timeout: float) -> None:
        """Return when ``topic`` may have been signalled, or after ``timeout`` seconds.

        Spurious returns are allowed; callers re-check the state they wait for.
        A signal raised while nobody waits on its topic is remembered, and the
        next ``wait`` on that topic returns at once, so no wake-up is lost
        between a caller's check and its wait. Every signal of a ``run_topic``
        also signals ``RUNS_TOPIC``.
        """
        ...

    async def wait_idle(self, topic: str, names: Collection[str], timeout: float) -> None:
        """``wait``, then on while this object's last poll of ``topic`` would still find nothing.

        The poll is ``lease`` for ``WORK_TOPIC`` and ``lease_schedules`` for
        ``SCHEDULE_TOPIC``, of ``names``. An idle worker calls this instead of
        ``wait``: it returns after ``timeout`` (or on a signal, as ``wait``
        does) unless the world can tell that the same poll, sent now, would
        find nothing, and then once it no longer can: a signal or a write from
        any process the world hears of, the moment the earliest item or
        schedule that poll saw comes due or its lease runs out, or the world's
        safety interval (RFC 0018, "Idle cost"). So an idle worker calls its
        world again only when something may have changed. A world that cannot
        tell returns as ``wait`` does; for any other topic it is ``wait``.
        """
        ...


@runtime_checkable
class Liveness(Protocol):
    """Registered workers and their heartbeats (RFC 0001, worker liveness). Checked
    by ``LivenessConformance``.

    An item leased by a registered worker that is not dead is not taken over
    when its own lease runs out: only once its holder is declared dead, gave
    the item back (``release``) or said goodbye (``unregister_worker``). A
    holder is dead when its last heartbeat is older than its window while
    another registered worker was seen heartbeating steadily for that whole
    window after it (``worlds._rules.liveness.is_dead``), so a world-wide
    freeze or outage, which stops every heartbeat, expires nobody. A worker
    the world declared dead is fenced: its leases are revoked and its
    heartbeats answer False. Items leased by workers that never registered
    keep the lease timer's rule.
    """

    async def register_worker(self, worker: WorkerInfo) -> WorkerRecord:
        """Record ``worker`` as live, its first heartbeat now, atomically.

        Registering an id again (a restarted process reusing it) starts it
        afresh, unless the world declared it dead: a fenced id stays dead,
        ``ValueError``. A worker with a ``build_id`` records its build's
        ``workflows`` (RFC 0025); one whose workflow names differ from those
        recorded for its build is refused, ``ValueError``, nothing written.
        """
        ...

    async def heartbeat(self, worker_id: str, in_flight: int) -> bool:
        """Record that ``worker_id`` is alive and holds ``in_flight`` items, in one
        statement whatever it holds.

        False: the worker is unknown, stopped or dead (declared so now if its
        last heartbeat makes it dead): it is fenced, its leases are revoked,
        and it must commit nothing more.
        """
        ...

    async def unregister_worker(self, worker_id: str) -> None:
        """Mark ``worker_id`` stopped: its remaining leases follow their timers
        again. Its record stays for ``list_workers``."""
        ...

    async def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, with its status by the world's clock, by id."""
        ...

    async def list_deployments(self) -> list[DeploymentRecord]:
        """Every build id workers registered with (RFC 0025), newest registration
        first: its workflows, its open runs (and how many of them still need it)
        and its live workers; which one is the newest build."""
        ...


@runtime_checkable
class Hooks(Protocol):
    """Hooks: delivering payloads to a run's hook tokens (RFC 0006) and
    start-or-resume (RFC 0012). Checked by ``HookConformance`` and
    ``ResumeConformance``.
    """

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """Deliver ``payload`` to the live hook ``token``, atomically: append
        ``HookReceived`` and wake the run's workflow. Returns the run id, or
        ``None`` if no open run holds the token (unknown or disposed).

        A second call with the same token and non-None ``resume_id`` appends
        nothing and returns the same run id again, even after that run closed
        (until it is pruned): exactly once per resume id. When a continue-as-new
        moved the token (see ``RunContinued``), the answer is its successor.
        A token held unbound (hook 0) gets ``HookReceived(hook=0, token=...)``.
        """
        ...

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """Deliver ``delivery`` to the open run holding the pair ``request.policy.key``
        names, or create the run of ``request`` with the payload waiting, atomically.

        The rules are ``worlds._rules.resume``: exactly once per resume id; a
        token nobody holds is taken unbound (hook 0) by the run, so a payload
        for a hook the run has not created yet waits for it; a token another
        run holds writes nothing (``hook_holder``). ``ValueError`` as for
        ``create_run``, or when ``request.policy`` is None.
        """
        ...

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """Live hooks (of one run, or all), oldest first."""
        ...


@runtime_checkable
class Updates(Protocol):
    """Updates: requests from outside that the workflow answers (RFC 0021).
    Checked by ``UpdateConformance``; the rules are ``worlds._rules.updates``.
    """

    async def send_update(self, run_id: str, delivery: UpdateDelivery) -> UpdateOutcome:
        """Deliver ``delivery`` to run ``run_id``, atomically: append ``UpdateReceived``
        and wake the run's workflow; the outcome is then ``pending``.

        An ``update_id`` the run accepted before appends nothing and answers that
        update's outcome, also after the run closed (until it is pruned): exactly
        once per id and run. A closed or unknown run appends nothing and answers
        ``failed`` saying why. ``ValueError`` for an empty or over-long name or id.
        """
        ...

    async def update_outcome(self, run_id: str, update_id: str) -> UpdateOutcome | None:
        """The outcome of update ``update_id`` of run ``run_id``, from its log: the
        first ``UpdateReplied``/``UpdateRejected`` for it, else ``failed`` once the
        run closed, else ``pending``. ``None`` when the run never accepted the id.
        A commit holding an answer signals ``run_topic(run_id)``."""
        ...

    async def update_with_start(
        self, request: CreateRunRequest, delivery: UpdateDelivery
    ) -> UpdateStartResult:
        """Deliver ``delivery`` to the open run holding the pair ``request.policy.key``
        names, or create the run of ``request`` with the update waiting in its log,
        atomically (the create flow's claim check decides a closed holder).

        An ``update_id`` the holder accepted before appends nothing and answers that
        update's outcome. ``ValueError`` as for ``create_run`` and ``send_update``,
        or when ``request.policy`` is None.
        """
        ...


@runtime_checkable
class Streams(Protocol):
    """Run streams (RFC 0012). Checked by ``StreamConformance``."""

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """Append ``chunks`` to stream ``name`` of run ``run_id``, atomically, and signal
        ``run_topic(run_id)``. Returns the offset of the first chunk; ``None`` when the
        run is closed or unknown, or the stream closed (nothing is written). See
        ``worlds._rules.streams``.
        """
        ...

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """Up to ``limit`` chunks of stream ``name`` of run ``run_id`` from offset ``start``."""
        ...

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """Whether workflow code closed stream ``name`` of run ``run_id`` (a
        ``StreamClosed`` command committed): it takes no chunk after that."""
        ...


@runtime_checkable
class Index(Protocol):
    """What the world indexes: runs by their fields and attributes, unique claims,
    limited pairs' slots. Checked by ``SearchConformance`` and the reads of
    ``ClaimsConformance`` and ``SlotsConformance``.
    """

    async def list_runs(self, query: RunQuery) -> RunPage:
        """Runs matching ``query``, newest first, one page at a time."""
        ...

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """Who holds the unique pair (key, value), or ``None``."""
        ...

    async def run_claims(self, run_id: str) -> list[Claim]:
        """The unique pairs run ``run_id`` and its steps hold now, by key then value.

        A step's claim has ``Claim.step`` set; the run's own have it None.
        """
        ...

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """The rows of the limited pair (key, value): holders, then waiters, each in
        arrival order (the order waiters are promoted in)."""
        ...

    async def run_slots(self, run_id: str) -> list[Slot]:
        """The limited pairs run ``run_id`` holds a slot of or waits in, by key then value."""
        ...

    async def get_key_limit(self, key: str) -> KeyLimit | None:
        """The limit of ``key`` (``World.set_key_limit``) with ``held``, the start-time
        slots of its values held now; ``None`` when it has none."""
        ...

    async def list_key_slots(self, key: str, limit: int = 1000) -> list[Slot]:
        """The rows of every limited pair of ``key``, at most ``limit``: by value (in
        ``index_value`` order), each pair's rows as ``list_slots`` orders them."""
        ...

    async def slot_history(
        self, key: str, since: datetime, until: datetime, width: int = 60
    ) -> list[SlotSample]:
        """The history of every limited pair of ``key``, by value (``index_value``
        order) then time: each pair's newest sample before ``since`` (the level it
        stood at when the window opens, as stored), then per bucket of ``width``
        seconds from ``since`` to ``until`` its samples merged into one whose
        ``minute`` is the bucket's start: ``holders`` and ``waiters`` of the last,
        the peaks the most of any. Buckets without a sample are absent (the pair
        stood as the previous one left it). The window is checked as ``count_runs``
        checks it (``worlds.semantics.check_window``); ``width`` must be whole
        minutes. Checked by ``SlotHistoryConformance``.
        """
        ...

    async def count_runs(
        self, query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
    ) -> list[RunCount]:
        """Runs matching ``query`` (its cursor and limit aside) whose ``field`` time
        is in ``[since, until)``, counted per bucket of ``width`` seconds from
        ``since`` and per status, by bucket then status; empty buckets are absent.

        The window and buckets are ``worlds.semantics.check_window`` and
        ``bucket_of``. Bad input raises as ``check_window`` does.
        """
        ...


@runtime_checkable
class Schedules(Protocol):
    """Schedules (RFC 0009): stored, compare-and-set, leased to one worker at a
    time. Checked by ``ScheduleConformance`` and ``ScheduleModelConformance``.
    """

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """Store a new schedule at version 1 and signal ``SCHEDULE_TOPIC``.

        Raises ``ValueError`` (nothing written) when the id is taken or the
        record is malformed (``worlds._rules.schedules.check_schedule``).
        """
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule, or ``None``."""
        ...

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """Up to ``limit`` schedules with ids greater than ``after``, in id order."""
        ...

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """Write the mutable fields of ``record`` if the stored version is ``record.version``.

        Atomic compare-and-set: returns the stored record, one version on, with
        any schedule lease released, and signals ``SCHEDULE_TOPIC``; returns
        ``None`` and writes nothing when the schedule is gone or was updated
        since it was read. The id, workflow, spec and creation time never change.
        """
        ...

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule; False if there was none. Runs it started stay."""
        ...

    async def lease_schedules(
        self,
        worker_id: str,
        *,
        names: Collection[str],
        limit: int,
        lease_seconds: float,
    ) -> ScheduleLease:
        """Lease up to ``limit`` due schedules whose workflow is in ``names``.

        Due means unpaused, ``wake_at`` passed by the world's clock, and not
        leased or the lease expired. A leased schedule is not leased again
        until ``update_schedule`` releases it or the lease expires; the lease
        only spares workers duplicate effort, since a fire's run id is
        derived from the fire time and so started at most once anyway.
        """
        ...

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        """Start the fires of leased schedules and store their new state, in one transaction.

        For each ``ScheduleFire``, in its order in the result: the schedule's
        new state (one version on, its lease released: its fires started as
        ``create_run`` would, a fire already started or refused by its pair
        passed over, as ``ScheduleFire`` says); ``None`` when the schedule was
        updated or deleted since ``fire.record`` was read (nothing of it
        written); or the exception one of its starts raised (nothing of it
        written). Signals ``SCHEDULE_TOPIC``. A world makes the batch durable
        at once (one transaction and one commit) and returns once it is.
        ``ValueError`` or ``TypeError`` for a malformed start: nothing written.
        """
        ...


Isolation = Literal["repeatable_read", "serializable", "read_committed"]
"""The isolation a transaction step asks for (PostgreSQL's levels; SQLite has one)."""

ISOLATION_LEVELS: tuple[Isolation, ...] = ("repeatable_read", "serializable", "read_committed")
"""Every ``Isolation``, the default first."""


class OpenTransaction(Protocol):
    """A write transaction of the world's own database, open while a transaction
    step runs (``Transactions.transaction``)."""

    @property
    def raw(self) -> Any:
        """The driver's connection the transaction is open on (``sqlite3.Connection``,
        an asyncpg connection): statements on it are part of the transaction."""
        ...

    @property
    def conflicted(self) -> bool:
        """Whether the database undid the transaction to resolve a conflict (a
        serialization failure or a deadlock): it can only be tried again."""
        ...

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement in the transaction, in the database's own parameter
        style (``?`` on SQLite, ``$1`` on PostgreSQL); the rows it returns."""
        ...

    async def commit(self, request: CommitRequest) -> CommitResult:
        """Apply ``request`` (the step's outcome, fenced by its lease) in this
        transaction and, if it is accepted, commit the transaction: the step's
        writes and its outcome become durable together.

        A conditional request the log has passed (``stale``) is undone alone
        and the transaction stays open for another ``commit``. Any other
        refusal (the lease lost, the run closed) rolls the whole transaction
        back: nothing of it is written. ``TransactionConflictError`` when the
        database undid the transaction (try it all again).
        """
        ...


@runtime_checkable
class Transactions(Protocol):
    """Transaction steps (``@transaction``): a step's writes to the world's own
    database and its recorded outcome in one transaction. Checked by
    ``TransactionConformance``."""

    def transaction(
        self, lease: WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AbstractAsyncContextManager[OpenTransaction]:
        """A write transaction on the world's database, for one attempt of the
        transaction step leased as ``lease`` to ``worker_id``; rolled back unless
        ``OpenTransaction.commit`` committed it.

        The lease is checked as the transaction opens, and the step's run and
        item are locked for its length (its commit checks the lease again):
        ``LeaseLostError`` when it is no longer held (nothing ran). SQLite takes
        the file's write lock for the block (its only isolation: serializable);
        PostgreSQL opens a transaction at ``isolation``.
        ``TransactionsUnsupportedError`` from a world that keeps no database
        (the memory world); ``TransactionConflictError`` when the database undid
        the transaction to resolve a conflict; ``ValueError`` for an unknown
        ``isolation``.
        """
        ...


@runtime_checkable
class Archive(Protocol):
    """A world's full dump and load (RFC 0024): the rows of ``worlds.archive``, the
    same for every backend, so a world's content moves to a world of another
    backend (``copy_world``) and exported runs go back in (``wf runs import``).
    Checked by ``ArchiveConformance``.
    """

    def export_rows(self, run_ids: Sequence[str] | None = None) -> AsyncIterator[DumpRow]:
        """Every row the world holds, or only those of the runs ``run_ids`` (unknown
        ids skipped), kinds in ``worlds.archive.ROW_ORDER`` within each page of runs.

        Payloads are the bytes stored (a codec world's stay encoded). Leases and
        registered workers are not rows: a leased item is dumped as due. Streams
        its reads a page at a time; a world written to meanwhile may give a dump
        that is no one moment's (stop the workers first).
        """
        ...

    async def import_rows(self, rows: Sequence[DumpRow]) -> None:
        """Write ``rows`` as they are (ids, generations, positions, versions kept), in
        one atomic operation; the rows of a run come in the same call as the run.

        Raises:
            ValueError: the world already holds one of the runs, claimed pairs,
                hook tokens or schedules, or a setting with another value, or a row
                names a run not in ``rows``: nothing is written.
        """
        ...


@runtime_checkable
class World(
    Lifecycle,
    Runs,
    Work,
    Liveness,
    Hooks,
    Updates,
    Streams,
    Index,
    Schedules,
    Transactions,
    Archive,
    Protocol,
):
    """A storage backend: every capability above. All timestamps are aware UTC datetimes.

    A part of the runtime that needs only some capabilities may take the part
    (``Runs``, ``Work``, ...) instead; ``worlds.wrapper.WorldWrapper`` forwards
    all of them.
    """
