"""The rows port: what a flow asks of a backend's storage, one row operation at a time.

``Rows`` is the protocol every backend implements over its transaction
(``worlds/memory/rows.py``, ``worlds/sqlite/rows.py``, ``worlds/postgres/rows.py``).
A method says what it reads or writes, in the backend's rows, never why: the
flows (``worlds._flows``) decide, in one order, for every backend. Locks are
the port's business: PostgreSQL's ``get_run`` locks the row until the
transaction ends and its ``slot_states`` takes the pairs' advisory locks;
SQLite and the memory world already hold their one writer's lock.

Every method that touches storage is ``async``. A backend whose storage does
not wait (SQLite inside its write transaction, the memory world) implements
them without ever suspending, and its flows run to the end in one step
(``worlds._flows.stepper.run_sync``).

Three exceptions end a transaction early, whatever the backend:
``Rollback(result)`` (undo everything, answer ``result``), ``Retry`` (undo
everything, run the flow again: a race lost to a concurrent transaction) and
``IdTaken`` (``insert_run`` found the run id taken; the flow raises the
caller's error).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from worlds import archive
from worlds._rules.claims import HeldClaim
from worlds._rules.key_limits import Candidate
from worlds._rules.liveness import Beat
from worlds._rules.rates import Reserved, Token
from worlds._rules.slots import PairState, PairView, Waiter
from worlds._rules.work import Placement
from worlds.types import (
    AttributeValue,
    EventKind,
    HookRecord,
    KeyLimit,
    NewWorkItem,
    Pin,
    ReuseWindow,
    RunCreated,
    RunRecord,
    RunStatus,
    ScheduleRecord,
    WorkItem,
)

__all__ = [
    "Beat",
    "Candidate",
    "ClaimRow",
    "ColumnsByName",
    "DroppedWork",
    "DumpSource",
    "HeldClaim",
    "HeldLease",
    "HookHolder",
    "HookRow",
    "IdTaken",
    "KeyRow",
    "LeaseRow",
    "LineEntry",
    "LoadRows",
    "Pair",
    "PairState",
    "PairView",
    "Placement",
    "QueuedWork",
    "Reserved",
    "Retry",
    "Rollback",
    "Rows",
    "RunBuild",
    "SlotRow",
    "Token",
    "Waiter",
    "Windowed",
    "WorkerRows",
    "WorldRows",
    "pair_state_of",
]

Pair = tuple[str, str]
"""A claimed or limited pair as rows are keyed: (key, ``index_value(value)``)."""


class Rollback(Exception):  # noqa: N818 - an instruction, not an error
    """Raised by a flow: undo the transaction and answer ``result`` instead."""

    def __init__(self, result: object) -> None:
        super().__init__()
        self.result = result


class Retry(Exception):  # noqa: N818 - an instruction, not an error
    """Raised by a flow that lost a race to a concurrent transaction between a read
    and a write: undo the transaction and run the flow again."""


class IdTaken(Exception):  # noqa: N818 - a fact about the rows
    """``insert_run`` found its run id taken; nothing was inserted."""


class ClaimRow(NamedTuple):
    """A claim as a run takes it: the pair and its value, the holder (with the step
    attempt, for a step's claim) and the reuse window."""

    pair: Pair
    value: AttributeValue
    run_id: str
    step: int | None
    attempt: int | None
    window: ReuseWindow


class SlotRow(NamedTuple):
    """A row of (``run_id``, ``hold``) at a limited pair, whose holders ask ``limit``."""

    pair: Pair
    value: AttributeValue
    run_id: str
    limit: int
    hold: int
    priority: int = 0
    """Waiters are promoted lowest ``priority`` first, then by arrival."""
    burst: int = 0
    """Slots above ``limit`` the pair may take while its key limit has room."""


class LineEntry(NamedTuple):
    """A value in a limited key's line (``Rows.key_line``): its pass and, while its
    pair has rows in line, its ``Candidate``."""

    ivalue: str
    share: float
    candidate: Candidate | None


class KeyRow(NamedTuple):
    """A key limit's row: the limit stored, the key's virtual time (the pass of the
    value served last), and the start-time slots held over all its values."""

    limit: KeyLimit
    vtime: float
    holding: int
    holder: str | None
    """One run holding a start-time slot of the key (``None``: nobody)."""


class HookRow(NamedTuple):
    """A hook token as run ``run_id`` holds it: as ``hook`` (0: unbound)."""

    token: str
    run_id: str
    hook: int
    attributes: Mapping[str, AttributeValue]


class LeaseRow(NamedTuple):
    """A work item's lease: its holder, fencing token and end, and the item's due
    time and attempt from then on."""

    worker_id: str
    token: int
    expires_at: datetime
    available_at: datetime
    attempt: int


class HeldLease(NamedTuple):
    """The leased item a commit holds: its kind and whether it was woken while leased."""

    kind: str
    rewake: bool


class QueuedWork(NamedTuple):
    """A work item's row, as a flow merging into it reads it."""

    name: str
    number: int
    attempt: int
    payload: bytes
    available_at: datetime
    owner: str | None
    expires_at: datetime | None
    ever_leased: bool


class DroppedWork(NamedTuple):
    """A step or timer item a cancel request dropped; ``in_flight``: a live lease held it."""

    kind: str
    number: int
    attempt: int
    in_flight: bool


class HookHolder(NamedTuple):
    """Who holds a hook token: the run and its hook number (0: held unbound)."""

    run_id: str
    hook: int


class Windowed(NamedTuple):
    """A claim with a reuse window, of a run that closes."""

    pair: Pair
    ttl: float | None
    release_on: frozenset[RunStatus]


class Rows(Protocol):
    """One write transaction's rows, as the flows read and write them.

    ``now`` is the transaction's time (events are stamped with it; a backend
    may move it forward as it takes locks, never back).
    """

    now: datetime

    # ------------------------------------------------------------ the transaction

    def signal(self, topic: str) -> None:
        """Wake ``World.wait`` callers on ``topic`` once the transaction committed."""
        ...

    def new_token(self) -> int:
        """A fresh fencing token for a lease."""
        ...

    async def savepoint(self) -> object:
        """Mark the transaction here; ``rollback_to`` undoes what follows."""
        ...

    async def rollback_to(self, savepoint: object) -> None:
        """Undo everything since ``savepoint`` (the rows, queued events and signals)."""
        ...

    async def release(self, savepoint: object) -> None:
        """Keep everything since ``savepoint``; forget the mark."""
        ...

    def fails_transaction(self, exc: Exception) -> bool:
        """Whether ``exc`` fails the whole transaction (a lock to wait for, a deadlock
        to retry), not only the request of a batch that raised it."""
        ...

    # ------------------------------------------------------------ runs and logs

    async def get_run(self, run_id: str, *, lock: bool = True) -> RunRecord | None:
        """The run (locked against other writers unless ``lock`` is False)."""
        ...

    async def commit_target(
        self,
        run_id: str,
        lease: WorkItem | None,
        worker_id: str,
        *,
        closing: bool = False,
        events_after: int | None = None,
    ) -> tuple[RunRecord, HeldLease | None] | None:
        """The run (locked) and, when ``worker_id`` still holds ``lease`` (its item
        of this run, under its token) and the run is open, that item's lease.

        Hints, so that a backend may answer more in the same read: ``closing``, the
        commit means to close the run (what closing it frees, ``drop_run_slots``);
        ``events_after``, the flow's next read is ``events(run_id, events_after)``."""
        ...

    async def insert_run(
        self,
        run: RunRecord,
        created: RunCreated,
        *,
        wake_at: datetime | None,
        saved_next: bool = False,
    ) -> None:
        """Store the new pending ``run``, its attributes' index terms and ``created``
        (seq 1); with ``wake_at``, its workflow item due then, and signal its
        workflow's ``work_topic``. Raises ``IdTaken``.

        ``saved_next``: the flow saves the run (``save_run``) before it ends, so a
        backend may hold the run's row back and write it once, in its saved state
        (its creation and first task in one row write); ``IdTaken`` may then be
        raised by any row operation up to that ``save_run``.
        """
        ...

    def append(self, run_id: str, event: EventKind) -> None:
        """Queue ``event``, numbered and dated, as the next of run ``run_id``; it is
        stored with the run by ``save_run``."""
        ...

    async def save_run(self, run: RunRecord) -> None:
        """Store ``run``'s queued events and its state (its attributes when they
        changed). A closed run's work items and hooks go with it."""
        ...

    async def index_attributes(self, run_id: str, attributes: Mapping[str, AttributeValue]) -> None:
        """Set the index terms of ``attributes`` (keys of run ``run_id``)."""
        ...

    async def drop_attribute(self, run_id: str, key: str) -> None:
        """Remove the run's index term for ``key`` (its record no longer holds it)."""
        ...

    async def events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """The stored events of the run with ``seq > after_seq``, in order."""
        ...

    async def hook_payloads(self, run_id: str) -> list[EventKind]:
        """The run's stored ``HookReceived`` events, in order."""
        ...

    async def rewrite_created(self, run_id: str, created: RunCreated) -> None:
        """Replace the run's first event, its ``RunCreated``, by ``created``."""
        ...

    async def set_admitted(self, run_id: str, at: datetime) -> None:
        """Record that pending run ``run_id`` is admitted at ``at`` (its rate tokens
        moved there): ``RunRecord.admitted_at``, which ``save_run`` never writes."""
        ...

    async def open_runs_with(self, key: str, value: AttributeValue) -> list[RunRecord]:
        """The open runs whose attribute ``key`` is ``value``, by id (locked)."""
        ...

    # ------------------------------------------------------------ claims

    async def get_claim(self, pair: Pair, *, lock: bool = False) -> HeldClaim | None:
        """The claim row of ``pair`` (released and tombstoned ones included)."""
        ...

    async def claim_if_free(self, claim: ClaimRow) -> int | None:
        """Take ``claim`` if no row holds its pair (none, or released); its generation
        then, one above the released one's. ``None``: held (and locked)."""
        ...

    async def put_claim(self, claim: ClaimRow, generation: int) -> None:
        """Store ``claim`` at ``generation`` (no lapse, no tombstone)."""
        ...

    async def windowed_claims(self, run_id: str) -> list[Windowed]:
        """The claims ``run_id`` holds that have a reuse window."""
        ...

    async def release_claim(self, pair: Pair) -> None:
        """Free ``pair``, keeping its generation."""
        ...

    async def lapse_claim(self, pair: Pair, at: datetime) -> None:
        """Mark ``pair`` free from ``at`` on."""
        ...

    async def carry_claims(self, old_run_id: str, new_run_id: str) -> None:
        """Hand the run-level claims of ``old_run_id`` to ``new_run_id``, each one
        generation up (continue-as-new)."""
        ...

    # ------------------------------------------------------------ hooks

    async def insert_hook(self, hook: HookRow) -> bool:
        """Store ``hook`` unless someone holds its token; False then."""
        ...

    async def bind_hook(self, hook: HookRow) -> bool:
        """Bind the token ``hook.run_id`` holds unbound to ``hook``; False if not so held."""
        ...

    async def hook_holder(self, token: str) -> HookHolder | None:
        """Who holds ``token``."""
        ...

    async def hook_run(self, token: str) -> tuple[RunRecord, int] | None:
        """The run holding ``token`` (locked) and its hook number, which stay so until
        the transaction ends; ``None`` when nobody holds it."""
        ...

    async def run_hooks(self, run_id: str) -> list[HookRecord]:
        """The tokens ``run_id`` holds."""
        ...

    async def carry_hooks(self, old_run_id: str, new_run_id: str) -> None:
        """Hand every token of ``old_run_id``, unbound, and its resume ids to ``new_run_id``."""
        ...

    async def resumed(self, token: str, resume_id: str) -> str | None:
        """The run a delivery to ``token`` with ``resume_id`` went to."""
        ...

    async def record_resume(self, token: str, resume_id: str, run_id: str) -> bool:
        """Record that the delivery went to ``run_id``; False if one was recorded first."""
        ...

    # ------------------------------------------------------------ updates

    async def update_seq(self, run_id: str, update_id: str) -> int | None:
        """The sequence number of run ``run_id``'s ``UpdateReceived`` for ``update_id``;
        ``None`` when the run never accepted that id."""
        ...

    async def record_update(self, run_id: str, update_id: str, seq: int) -> bool:
        """Record that run ``run_id`` accepts ``update_id`` as its event ``seq``; False
        (nothing written) if the id was recorded first, by a concurrent transaction too."""
        ...

    # ------------------------------------------------------------ slots

    async def slot_states(self, pairs: Sequence[Pair]) -> list[PairState]:
        """Each limited pair's holders and waiters, in ``pairs``' order, the pairs
        locked (in sorted order) until the transaction ends."""
        ...

    async def insert_slots(self, slots: Sequence[SlotRow], *, holding: bool) -> None:
        """Store ``slots`` (one run's, of one hold), holding or in line, each after every
        row at its pair (pairs locked)."""
        ...

    async def drop_run_slots(self, run_id: str) -> list[Pair]:
        """Drop every row of ``run_id``; the pairs it stood at (locked)."""
        ...

    async def drop_hold(self, run_id: str, hold: int) -> list[Pair]:
        """Drop the rows of hold ``hold`` of ``run_id``; their pairs (locked)."""
        ...

    async def drop_holds(self, run_id: str) -> list[Pair]:
        """Drop the rows of every ``hold()`` of ``run_id`` (not hold 0); their pairs."""
        ...

    async def first_waiter(self, pair: Pair) -> Waiter | None:
        """The first row in line at ``pair``."""
        ...

    async def waiting_views(
        self, run_id: str, hold: int, near: Sequence[Pair] = ()
    ) -> list[PairView]:
        """A view of every pair where (``run_id``, ``hold``) waits, those pairs locked;
        ``near``: pairs it is known to wait in (a backend that locks may lock them
        before it reads)."""
        ...

    async def promote(self, run_id: str, hold: int) -> None:
        """The waiting rows of (``run_id``, ``hold``) take their slots; for hold 0 the
        run also gets its workflow item, due now."""
        ...

    async def carry_slots(self, old_run_id: str, new_run_id: str) -> None:
        """Hand ``old_run_id``'s remaining rows (its start-time slots) to ``new_run_id``."""
        ...

    async def sample_slots(self, pairs: Sequence[Pair], minute: datetime) -> None:
        """Store each pair's holders and waiters now as its sample of ``minute``: the
        sample's ``holders``/``waiters`` become these, its peaks the greater of the
        stored ones and these (``worlds.types.SlotSample``). ``pairs`` are sorted."""
        ...

    async def drop_slot_samples(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` samples of minutes before ``before``, keeping each
        pair's newest sample unless it shows the pair empty; how many went."""
        ...

    # ------------------------------------------------------------ key limits

    async def key_queued(self, key: str, ivalue: str) -> bool | None:
        """Whether value ``ivalue`` of limited ``key`` waits in the key's line
        (``None``: the key has no limit). Read without the key's lock."""
        ...

    async def key_row(self, key: str) -> KeyRow | None:
        """The limit of ``key`` and its use (the key locked until the transaction ends);
        ``None`` when the key has no limit (then it need not be locked: a limit set
        meanwhile applies to the admissions after it)."""
        ...

    async def key_waiting(self, key: str) -> list[Candidate]:
        """Each value of ``key`` with rows in line: its first row in line (``head``,
        its ``limit``, ``burst``, ``priority`` and ``position``), the slots held at
        its pair and the value's stored ``share`` (0 when none), by value."""
        ...

    async def key_share(self, key: str, ivalue: str) -> float:
        """The stored share (pass) of value ``ivalue`` of ``key`` (0 when none)."""
        ...

    async def key_line(
        self, key: str, after: tuple[float, str] | None, count: int
    ) -> list[LineEntry]:
        """The next ``count`` values in the line of ``key`` (values marked in line by
        ``put_key_pass`` and not taken out by ``leave_key_line``), by (pass, value
        index text; binary order) after ``after`` (``None``: from the head); each with
        its pair's ``Candidate`` as ``key_waiting`` gives it, ``None`` when its pair
        has no row in line. One indexed range read, however many values wait."""
        ...

    async def key_pass(self, key: str, ivalue: str) -> tuple[float, bool]:
        """The stored share (pass) of value ``ivalue`` of ``key`` (0 when none) and
        whether the value is marked in the key's line."""
        ...

    async def put_key_pass(self, key: str, ivalue: str, share: float) -> None:
        """Store the value's share and mark it in the key's line."""
        ...

    async def leave_key_line(self, key: str, ivalue: str) -> None:
        """Take value ``ivalue`` out of the line of ``key`` (its share stays)."""
        ...

    async def put_key_share(self, key: str, ivalue: str, share: float, vtime: float) -> None:
        """Store the value's share and the key's virtual time ``vtime``."""
        ...

    async def put_key_limit(self, limit: KeyLimit) -> None:
        """Store ``limit`` (replacing the key's; its virtual time and shares stay), the
        key locked until the transaction ends."""
        ...

    async def drop_key_limit(self, key: str) -> None:
        """Delete the limit of ``key`` and its shares (the key locked)."""
        ...

    # ------------------------------------------------------------ rate tokens

    async def rate_tokens(self, pair: Pair, lapsed: datetime, count: int) -> list[Token]:
        """Drop the pair's tokens at or before ``lapsed``; the ``count`` newest of the
        rest, newest first, the pair locked (in sorted order) until the transaction ends."""
        ...

    async def tokens_after(self, pair: Pair, since: datetime, count: int) -> list[Token]:
        """The pair's first ``count`` tokens after ``since``, oldest first (pair locked)."""
        ...

    async def insert_token(self, pair: Pair, number: int, token: Token, priority: int = 0) -> None:
        """Store ``token`` of the pair as (``token.run_id``, ``number``), taken under its
        rate by a run of ``priority`` (pair locked)."""
        ...

    async def reserved_tokens(self, pair: Pair, after: datetime, priority: int) -> list[Reserved]:
        """The pair's start-time tokens (number 0) after ``after`` whose priority is
        higher than ``priority``, oldest first (pair locked)."""
        ...

    async def run_tokens(self, run_id: str) -> list[tuple[Pair, Token, int]]:
        """Every token of ``run_id``: its pair, the token and its number."""
        ...

    async def drop_token(self, pair: Pair, run_id: str, number: int) -> None:
        """Drop token ``number`` of ``run_id`` at ``pair`` (pair locked)."""
        ...

    # ------------------------------------------------------------ work

    async def add_work(self, run_id: str, new: NewWorkItem, placed: Placement) -> bool:
        """Store item ``placed`` unless the run has an item with its id; False then."""
        ...

    async def put_work(self, run_id: str, new: NewWorkItem, placed: Placement) -> None:
        """Store item ``placed``, replacing one with its id."""
        ...

    async def get_work(self, run_id: str, item_id: str) -> QueuedWork | None:
        """The item's row (locked)."""
        ...

    async def set_rewake(self, run_id: str, item_id: str) -> None:
        """Mark the (leased) item to be due again once its lease is acked."""
        ...

    async def set_available(self, run_id: str, item_id: str, at: datetime) -> None:
        """Make the item due at ``at``."""
        ...

    async def lease_work(self, run_id: str, item_id: str, lease: LeaseRow) -> None:
        """Lease the item as ``lease`` says."""
        ...

    async def rewake_item(self, run_id: str, item_id: str) -> None:
        """Give the item's lease back and make it due now (an ack of a rewoken item)."""
        ...

    async def delete_item(self, run_id: str, item_id: str) -> None:
        """Delete the item."""
        ...

    async def lease_holder(self, lease: WorkItem) -> str | None:
        """Who holds the item ``lease`` names now."""
        ...

    async def drop_cancelled_work(self, run_id: str) -> list[DroppedWork]:
        """Delete the run's step and timer items; what each was."""
        ...

    # ------------------------------------------------------------ streams

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        """Append ``chunks`` to the run's stream ``name``; the offset of the first."""
        ...

    async def close_stream(self, run_id: str, name: str) -> None:
        """Mark the run's stream ``name`` closed (again: nothing changes)."""
        ...

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """Whether the run's stream ``name`` is closed."""
        ...

    # ------------------------------------------------------------ retention

    async def prunable(
        self, closed_before: datetime, limit: int, *, status: RunStatus | None = None
    ) -> list[str]:
        """Up to ``limit`` runs closed before ``closed_before`` (only those closed as
        ``status``, if given), oldest first, none of them pinned (holding the
        attribute ``$pinned``, ``worlds._rules.retention.PIN_KEY``), locked; runs
        another transaction holds are passed over."""
        ...

    async def release_lapsed_claims(self) -> None:
        """Free every claim whose lapse time passed (by ``now``)."""
        ...

    async def retire_claims(self, run_ids: Sequence[str], *, release: bool) -> None:
        """The claims of the runs ``run_ids``, which are closed: released, or kept as
        tombstones naming each run's final status."""
        ...

    async def release_tombstones(self) -> None:
        """Free every tombstone (a claim whose holder was pruned), keeping its generation."""
        ...

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the runs and every row of theirs (events, attributes, work, hooks,
        resumes, streams)."""
        ...

    # ------------------------------------------------------------ schedules

    async def insert_schedule(self, record: ScheduleRecord) -> bool:
        """Store a new schedule; False if its id is taken."""
        ...

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """The schedule (locked)."""
        ...

    async def put_schedule(self, record: ScheduleRecord) -> None:
        """Store the schedule's new state, its lease released."""
        ...

    async def get_schedules(self, schedule_ids: Sequence[str]) -> list[ScheduleRecord]:
        """The schedules of ``schedule_ids`` that exist (locked), in id order."""
        ...

    async def put_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Store each schedule's new state, its lease released (``put_schedule`` of each)."""
        ...

    async def existing_runs(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` are taken (by a run stored, or pruned and gone: not those)."""
        ...


class DumpSource(Protocol):
    """A world's rows as its full dump reads them (``worlds._flows.archive``), each
    list in the order of its table's key."""

    async def dumped_settings(self) -> list[archive.DumpRow]:
        """Every setting."""
        ...

    async def dumped_run_ids(self, after: str, limit: int) -> list[str]:
        """Up to ``limit`` run ids greater than ``after``, in order."""
        ...

    async def dumped_run_rows(self, run_ids: Sequence[str]) -> list[archive.DumpRow]:
        """The rows of the runs ``run_ids`` (those stored), kinds in ``ROW_ORDER``: each
        run with its log, then their claims (not tombstones), slots, rate tokens,
        hooks, resume ids, accepted update ids, work items (without leases) and
        stream chunks."""
        ...

    async def dumped_world_rows(self) -> list[archive.DumpRow]:
        """The rows no stored run owns: tombstones, released pairs, schedules (without
        leases), key limits, their values' shares and deployments, in ``ROW_ORDER``."""
        ...


class LoadRows(Protocol):
    """Writing dumped rows as they are (``worlds._flows.archive``), inside one write
    transaction, after the flow checked that none of them is taken."""

    async def stored_setting(self, key: str) -> str | None:
        """The setting ``key``, or ``None``."""
        ...

    async def stored_deployment(self, build_id: str) -> dict[str, Pin] | None:
        """The workflows recorded for build ``build_id`` with their pins, or ``None``."""
        ...

    async def load_settings(self, rows: Sequence[archive.DumpedSetting]) -> None:
        """Store the settings."""
        ...

    async def load_runs(self, rows: Sequence[archive.DumpedRun]) -> None:
        """Store each run, its attributes' index terms and its whole log."""
        ...

    async def load_claims(
        self, claims: Sequence[archive.DumpedClaim], released: Sequence[archive.DumpedRelease]
    ) -> None:
        """Store the claims (held and tombstones) and released pairs, generations kept."""
        ...

    async def load_slots(self, rows: Sequence[archive.DumpedSlot]) -> None:
        """Store the slot rows, positions kept (later arrivals still come after them)."""
        ...

    async def load_tokens(self, rows: Sequence[archive.DumpedToken]) -> None:
        """Store the rate-limit tokens."""
        ...

    async def load_hooks(
        self, hooks: Sequence[archive.DumpedHook], resumes: Sequence[archive.DumpedResume]
    ) -> None:
        """Store the live hooks and the remembered resume ids."""
        ...

    async def load_updates(self, rows: Sequence[archive.DumpedUpdate]) -> None:
        """Store the update ids the runs accepted, with their events' ``seq``."""
        ...

    async def load_work(self, rows: Sequence[archive.DumpedWork]) -> None:
        """Store the work items, unleased, and signal ``WORK_TOPIC``."""
        ...

    async def load_chunks(self, rows: Sequence[archive.DumpedChunk]) -> None:
        """Store the stream chunks."""
        ...

    async def load_schedules(self, rows: Sequence[archive.DumpedSchedule]) -> None:
        """Store the schedules, versions kept, unleased."""
        ...

    async def load_key_limits(
        self, limits: Sequence[archive.DumpedKeyLimit], shares: Sequence[archive.DumpedKeyShare]
    ) -> None:
        """Store the key limits (weights and virtual time kept) and their values' shares."""
        ...

    async def load_deployments(self, rows: Sequence[archive.DumpedDeployment]) -> None:
        """Store the deployments' rows, pins and registration times kept."""
        ...


class WorkerRows(Protocol):
    """The registered workers' rows, as the liveness flows (``worlds._flows.liveness``)
    read and write them inside one write transaction."""

    now: datetime

    async def workers(self) -> list[Beat]:
        """Every registered worker's row."""
        ...

    async def worker(self, worker_id: str) -> Beat | None:
        """The row of ``worker_id`` (locked)."""
        ...

    async def put_worker(self, worker: Beat) -> None:
        """Store ``worker``'s row, replacing the one with its id."""
        ...

    async def drop_workers(self, beaten_before: datetime) -> None:
        """Delete the rows of the workers whose last heartbeat is before ``beaten_before``."""
        ...

    async def revoke_leases(self, worker_id: str) -> None:
        """Give back every item ``worker_id`` holds (as ``release`` would) and signal
        ``WORK_TOPIC``."""
        ...

    async def deployment(self, build_id: str) -> dict[str, Pin] | None:
        """The workflows recorded for ``build_id`` with their pins; ``None``: none yet."""
        ...

    async def put_deployment(self, build_id: str, workflows: Mapping[str, Pin]) -> None:
        """Record ``workflows`` for ``build_id`` (registered now if it is new), replacing
        its pins."""
        ...

    async def run_builds(self, run_ids: Collection[str]) -> list[RunBuild]:
        """The builds recorded by those of ``run_ids`` that exist."""
        ...

    async def set_run_build(self, run_id: str, build_id: str, pin: Pin) -> None:
        """Record that ``run_id`` runs on ``build_id`` with ``pin``."""
        ...


class RunBuild(NamedTuple):
    """The build a run recorded (RFC 0025): its workflow, build id and pin."""

    run_id: str
    workflow: str
    build_id: str | None
    pin: Pin | None


class ColumnsByName(Protocol):
    """A database row read by column name (``sqlite3.Row``, ``asyncpg.Record``)."""

    def __getitem__(self, column: str) -> Any: ...


def pair_state_of(row: ColumnsByName) -> PairState:
    """A backend's ``SLOT_STATE`` row (``holding``, ``holder``, ``first_waiter``,
    ``lim``) as the ``PairState`` a flow reads: both SQL backends select the same columns."""
    waiting = 0 if row["first_waiter"] is None else 1
    return PairState(row["holding"], waiting, row["holder"] or row["first_waiter"], row["lim"])


class WorldRows(Rows, WorkerRows, Protocol):
    """A backend's rows as a whole: runs and their companions (``Rows``) and the
    registered workers (``WorkerRows``), in one write transaction."""
