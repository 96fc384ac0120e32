"""The memory world's rows port: ``worlds._flows.rows.Rows`` over its dictionaries.

``MemoryRows`` is one operation's view of the world's stores (``Tables``): each
row operation the flows ask for, applied at once and journaled
(``worlds.memory.journal``), so the operation can be undone if its flow fails.
The events a flow appends wait in the operation until ``save_run`` stores them
with the run, as a database's queued rows would; the topics it signals are
delivered only once the flow returned. The methods are ``async`` for the
port's sake but never suspend, so a flow over them runs to its end in one step
and no other task sees it half done.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from worlds import types
from worlds._flows import rows as port
from worlds._flows.deployments import Deployed
from worlds.memory.claims import ClaimStore
from worlds.memory.hooks import HookStore
from worlds.memory.journal import Journal
from worlds.memory.key_limits import KeyLimitStore
from worlds.memory.rates import RateStore
from worlds.memory.runs import RunStore
from worlds.memory.schedules import ScheduleStore
from worlds.memory.slot_history import SampleStore
from worlds.memory.slots import SlotStore
from worlds.memory.streams import StreamStore
from worlds.memory.work import WorkQueue
from worlds.protocol import WORK_TOPIC, work_topic
from worlds.semantics import workflow_item_id

__all__ = ["MemoryRows", "Tables"]


@dataclass
class Tables:
    """Every store of one memory world, sharing one journal."""

    journal: Journal
    runs: RunStore
    work: WorkQueue
    claims: ClaimStore
    hooks: HookStore
    slots: SlotStore
    samples: SampleStore
    streams: StreamStore
    schedules: ScheduleStore
    rates: RateStore
    key_limits: KeyLimitStore
    workers: dict[str, port.Beat] = field(default_factory=dict)
    updates: dict[tuple[str, str], int] = field(default_factory=dict)
    """By (run, update id): the sequence number of the run's ``UpdateReceived``."""
    deployments: dict[str, Deployed] = field(default_factory=dict)


@dataclass
class _Savepoint:
    mark: int
    signals: frozenset[str]
    pending: dict[str, list[types.EventKind]] = field(default_factory=dict)


class MemoryRows:
    """The rows of one memory world operation."""

    def __init__(self, tables: Tables, clock: Callable[[], datetime]) -> None:
        self._t = tables
        self.now = clock()
        self.signals: set[str] = set()
        """The topics to signal once the operation's flow returned."""
        self._pending: dict[str, list[types.EventKind]] = {}

    # ------------------------------------------------------------ the transaction

    def signal(self, topic: str) -> None:
        self.signals.add(topic)

    def new_token(self) -> int:
        return self._t.work.new_token()

    async def savepoint(self) -> object:
        pending = {run_id: list(events) for run_id, events in self._pending.items()}
        return _Savepoint(self._t.journal.mark(), frozenset(self.signals), pending)

    async def rollback_to(self, savepoint: object) -> None:
        assert isinstance(savepoint, _Savepoint)
        self._t.journal.undo_to(savepoint.mark)
        self.signals, self._pending = set(savepoint.signals), savepoint.pending

    async def release(self, savepoint: object) -> None:
        return None

    def fails_transaction(self, exc: Exception) -> bool:
        return False

    def _wake_new(self, run_id: str, workflow: str, at: datetime) -> None:
        """Give a run without one its workflow item, due ``at``."""
        item_id = workflow_item_id(run_id)
        placed = port.Placement(item_id, workflow, at, None, 0, None, None, None)
        self._t.work.add(run_id, types.NewWorkItem(kind="workflow"), placed)
        self.signals.add(work_topic(workflow))

    # ------------------------------------------------------------ runs and logs

    async def get_run(self, run_id: str, *, lock: bool = True) -> types.RunRecord | None:
        return self._t.runs.get(run_id)

    async def commit_target(
        self,
        run_id: str,
        lease: types.WorkItem | None,
        worker_id: str,
        *,
        closing: bool = False,
        events_after: int | None = None,
    ) -> tuple[types.RunRecord, port.HeldLease | None] | None:
        run = self._t.runs.get(run_id)
        if run is None:
            return None
        held = None
        if lease is not None and not run.status.is_closed:
            item = self._t.work.holds(lease, worker_id)
            if item is not None and item.run_id == run_id:
                held = port.HeldLease(item.kind, item.rewake)
        return run, held

    async def insert_run(
        self,
        run: types.RunRecord,
        created: types.RunCreated,
        *,
        wake_at: datetime | None,
        saved_next: bool = False,
    ) -> None:
        if not self._t.runs.insert(run, created):
            raise port.IdTaken(run.id)
        if wake_at is not None:
            self._wake_new(run.id, run.workflow, wake_at)

    def append(self, run_id: str, event: types.EventKind) -> None:
        self._pending.setdefault(run_id, []).append(event)

    async def save_run(self, run: types.RunRecord) -> None:
        self._t.runs.store(run, self._pending.pop(run.id, []))
        if run.status.is_closed:
            self._t.work.drop_run(run.id)
            self._t.hooks.dispose(run.id)

    async def index_attributes(
        self, run_id: str, attributes: Mapping[str, types.AttributeValue]
    ) -> None:
        return None  # the run's record is its own index here

    async def drop_attribute(self, run_id: str, key: str) -> None:
        return None  # the run's record is its own index here

    async def events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        return self._t.runs.events(run_id, after_seq)

    async def hook_payloads(self, run_id: str) -> list[types.EventKind]:
        return [e for e in self._t.runs.events(run_id) if isinstance(e, types.HookReceived)]

    async def rewrite_created(self, run_id: str, created: types.RunCreated) -> None:
        self._t.runs.rewrite_created(run_id, created)

    async def set_admitted(self, run_id: str, at: datetime) -> None:
        self._t.runs.admit(run_id, at)

    async def open_runs_with(self, key: str, value: types.AttributeValue) -> list[types.RunRecord]:
        return self._t.runs.open_with(key, value)

    # ------------------------------------------------------------ claims

    async def get_claim(self, pair: port.Pair, *, lock: bool = False) -> port.HeldClaim | None:
        return self._t.claims.held(pair)

    async def claim_if_free(self, claim: port.ClaimRow) -> int | None:
        return self._t.claims.claim_if_free(claim)

    async def put_claim(self, claim: port.ClaimRow, generation: int) -> None:
        self._t.claims.put(claim, generation)

    async def windowed_claims(self, run_id: str) -> list[port.Windowed]:
        return self._t.claims.windowed(run_id)

    async def release_claim(self, pair: port.Pair) -> None:
        self._t.claims.release(pair)

    async def lapse_claim(self, pair: port.Pair, at: datetime) -> None:
        self._t.claims.lapse(pair, at)

    async def carry_claims(self, old_run_id: str, new_run_id: str) -> None:
        self._t.claims.carry(old_run_id, new_run_id)

    # ------------------------------------------------------------ hooks

    async def insert_hook(self, hook: port.HookRow) -> bool:
        return self._t.hooks.insert(hook, self.now)

    async def bind_hook(self, hook: port.HookRow) -> bool:
        return self._t.hooks.bind(hook)

    async def hook_holder(self, token: str) -> port.HookHolder | None:
        return self._t.hooks.holder(token)

    async def hook_run(self, token: str) -> tuple[types.RunRecord, int] | None:
        holder = self._t.hooks.holder(token)
        if holder is None:
            return None
        run = self._t.runs.get(holder.run_id)
        assert run is not None, "a hook goes with its run"
        return run, holder.hook

    async def run_hooks(self, run_id: str) -> list[types.HookRecord]:
        return self._t.hooks.list(run_id)

    async def carry_hooks(self, old_run_id: str, new_run_id: str) -> None:
        self._t.hooks.carry(old_run_id, new_run_id)

    async def resumed(self, token: str, resume_id: str) -> str | None:
        return self._t.hooks.resumed.get((token, resume_id))

    async def record_resume(self, token: str, resume_id: str, run_id: str) -> bool:
        return self._t.hooks.record_resume(token, resume_id, run_id)

    # ------------------------------------------------------------ updates

    async def update_seq(self, run_id: str, update_id: str) -> int | None:
        return self._t.updates.get((run_id, update_id))

    async def record_update(self, run_id: str, update_id: str, seq: int) -> bool:
        if (run_id, update_id) in self._t.updates:
            return False
        self._t.journal.put(self._t.updates, (run_id, update_id), seq)
        return True

    # ------------------------------------------------------------ slots

    async def slot_states(self, pairs: Sequence[port.Pair]) -> list[port.PairState]:
        return [self._t.slots.state(pair) for pair in pairs]

    async def insert_slots(self, slots: Sequence[port.SlotRow], *, holding: bool) -> None:
        self._t.slots.insert(slots, holding=holding)

    async def drop_run_slots(self, run_id: str) -> list[port.Pair]:
        return self._t.slots.drop(run_id)

    async def drop_hold(self, run_id: str, hold: int) -> list[port.Pair]:
        return self._t.slots.drop(run_id, {hold})

    async def drop_holds(self, run_id: str) -> list[port.Pair]:
        return self._t.slots.drop(run_id, self._t.slots.holds_of(run_id) - {0})

    async def first_waiter(self, pair: port.Pair) -> port.Waiter | None:
        return self._t.slots.first_waiter(pair)

    async def waiting_views(
        self, run_id: str, hold: int, near: Sequence[port.Pair] = ()
    ) -> list[port.PairView]:
        return self._t.slots.views(run_id, hold)

    async def promote(self, run_id: str, hold: int) -> None:
        self._t.slots.promote(run_id, hold)
        if hold == 0:
            run = self._t.runs.get(run_id)
            assert run is not None, "a waiting run is open"
            self._wake_new(run_id, run.workflow, self.now)

    async def carry_slots(self, old_run_id: str, new_run_id: str) -> None:
        self._t.slots.carry(old_run_id, new_run_id)

    async def sample_slots(self, pairs: Sequence[port.Pair], minute: datetime) -> None:
        for pair in pairs:
            state = self._t.slots.state(pair)
            self._t.samples.put(pair, minute, state.holding, state.waiting)

    async def drop_slot_samples(self, before: datetime, limit: int) -> int:
        return self._t.samples.drop(before, limit)

    # ------------------------------------------------------------ key limits

    async def key_queued(self, key: str, ivalue: str) -> bool | None:
        store = self._t.key_limits
        return None if store.get(key) is None else store.queued(key, ivalue)

    async def key_row(self, key: str) -> port.KeyRow | None:
        found = self._t.key_limits.get(key)
        if found is None:
            return None
        holding, holder = self._t.slots.key_held(key)
        return port.KeyRow(found[0], found[1], holding, holder)

    async def key_waiting(self, key: str) -> list[port.Candidate]:
        return [
            port.Candidate(
                ivalue,
                (row.run_id, row.hold),
                row.limit,
                row.burst,
                holding,
                row.priority,
                row.position,
                self._t.key_limits.share(key, ivalue),
            )
            for ivalue, row, holding in self._t.slots.key_waiting(key)
        ]

    async def key_share(self, key: str, ivalue: str) -> float:
        return self._t.key_limits.share(key, ivalue)

    async def put_key_share(self, key: str, ivalue: str, share: float, vtime: float) -> None:
        self._t.key_limits.put_share(key, ivalue, share, vtime)

    async def key_line(
        self, key: str, after: tuple[float, str] | None, count: int
    ) -> list[port.LineEntry]:
        out = []
        for ivalue, share in self._t.key_limits.line(key, after, count):
            found = self._t.slots.head_at((key, ivalue))
            candidate = None
            if found is not None:
                row, holding = found
                head = (row.run_id, row.hold)
                candidate = port.Candidate(
                    ivalue, head, row.limit, row.burst, holding, row.priority, row.position, share
                )
            out.append(port.LineEntry(ivalue, share, candidate))
        return out

    async def key_pass(self, key: str, ivalue: str) -> tuple[float, bool]:
        store = self._t.key_limits
        return store.share(key, ivalue), store.queued(key, ivalue)

    async def put_key_pass(self, key: str, ivalue: str, share: float) -> None:
        self._t.key_limits.enqueue(key, ivalue, share)

    async def leave_key_line(self, key: str, ivalue: str) -> None:
        self._t.key_limits.leave(key, ivalue)

    async def put_key_limit(self, limit: types.KeyLimit) -> None:
        self._t.key_limits.put(limit)

    async def drop_key_limit(self, key: str) -> None:
        self._t.key_limits.drop(key)

    # ------------------------------------------------------------ rate tokens

    async def rate_tokens(self, pair: port.Pair, lapsed: datetime, count: int) -> list[port.Token]:
        return self._t.rates.tokens(pair, lapsed, count)

    async def tokens_after(self, pair: port.Pair, since: datetime, count: int) -> list[port.Token]:
        return self._t.rates.after(pair, since, count)

    async def insert_token(
        self, pair: port.Pair, number: int, token: port.Token, priority: int = 0
    ) -> None:
        self._t.rates.insert(pair, token.run_id, number, token, priority)

    async def reserved_tokens(
        self, pair: port.Pair, after: datetime, priority: int
    ) -> list[port.Reserved]:
        return self._t.rates.reserved(pair, after, priority)

    async def run_tokens(self, run_id: str) -> list[tuple[port.Pair, port.Token, int]]:
        return self._t.rates.of_run(run_id)

    async def drop_token(self, pair: port.Pair, run_id: str, number: int) -> None:
        self._t.rates.drop(pair, run_id, number)

    # ------------------------------------------------------------ work

    async def add_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> bool:
        return self._t.work.add(run_id, new, placed)

    async def put_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> None:
        self._t.work.put(run_id, new, placed)

    async def get_work(self, run_id: str, item_id: str) -> port.QueuedWork | None:
        item = self._t.work.items.get(item_id)
        if item is None:
            return None
        return port.QueuedWork(
            item.name,
            item.number,
            item.attempt,
            item.payload,
            item.available_at,
            item.owner,
            item.expires_at,
            item.ever_leased,
        )

    async def set_rewake(self, run_id: str, item_id: str) -> None:
        self._t.work.update(item_id, rewake=True)

    async def set_available(self, run_id: str, item_id: str, at: datetime) -> None:
        self._t.work.update(item_id, available_at=at)

    async def lease_work(self, run_id: str, item_id: str, lease: port.LeaseRow) -> None:
        self._t.work.update(
            item_id,
            available_at=lease.available_at,
            owner=lease.worker_id,
            token=lease.token,
            expires_at=lease.expires_at,
            attempt=lease.attempt,
            rewake=False,
            ever_leased=True,
        )

    async def rewake_item(self, run_id: str, item_id: str) -> None:
        self._t.work.update(
            item_id, owner=None, expires_at=None, rewake=False, available_at=self.now
        )

    async def delete_item(self, run_id: str, item_id: str) -> None:
        self._t.work.delete(item_id)

    async def lease_holder(self, lease: types.WorkItem) -> str | None:
        item = self._t.work.items.get(lease.id)
        return None if item is None else item.owner

    async def drop_cancelled_work(self, run_id: str) -> list[port.DroppedWork]:
        dropped = []
        for item in self._t.work.drop_run(run_id, kinds=("step", "timer")):
            in_flight = item.owner is not None and (
                item.expires_at is not None and item.expires_at > self.now
            )
            dropped.append(port.DroppedWork(item.kind, item.number, item.attempt, in_flight))
        return dropped

    # ------------------------------------------------------------ workers

    async def workers(self) -> list[port.Beat]:
        return list(self._t.workers.values())

    async def worker(self, worker_id: str) -> port.Beat | None:
        return self._t.workers.get(worker_id)

    async def put_worker(self, worker: port.Beat) -> None:
        self._t.journal.put(self._t.workers, worker.info.id, worker)

    async def drop_workers(self, beaten_before: datetime) -> None:
        gone = [w.info.id for w in self._t.workers.values() if w.last_beat < beaten_before]
        for worker_id in gone:
            self._t.journal.pop(self._t.workers, worker_id)

    async def revoke_leases(self, worker_id: str) -> None:
        held = [item.id for item in self._t.work.items.values() if item.owner == worker_id]
        for item_id in held:
            self._t.work.update(item_id, owner=None, expires_at=None)
        self.signal(WORK_TOPIC)

    async def deployment(self, build_id: str) -> dict[str, types.Pin] | None:
        deployed = self._t.deployments.get(build_id)
        return None if deployed is None else dict(deployed.workflows)

    async def put_deployment(self, build_id: str, workflows: Mapping[str, types.Pin]) -> None:
        if not workflows:  # as a table would: no row, nothing recorded
            if build_id in self._t.deployments:
                self._t.journal.pop(self._t.deployments, build_id)
            return
        old = self._t.deployments.get(build_id)
        since = self.now if old is None else old.registered_at
        deployed = Deployed(build_id, dict(workflows), since)
        self._t.journal.put(self._t.deployments, build_id, deployed)

    async def run_builds(self, run_ids: Collection[str]) -> list[port.RunBuild]:
        found = [self._t.runs.get(run_id) for run_id in run_ids]
        return [
            port.RunBuild(run.id, run.workflow, run.build_id, run.pin)
            for run in found
            if run is not None
        ]

    async def set_run_build(self, run_id: str, build_id: str, pin: types.Pin) -> None:
        run = self._t.runs.get(run_id)
        if run is not None:
            self._t.runs.store(msgspec.structs.replace(run, build_id=build_id, pin=pin), [])

    # ------------------------------------------------------------ streams

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        return self._t.streams.append(run_id, name, chunks, self.now)

    async def close_stream(self, run_id: str, name: str) -> None:
        self._t.streams.close(run_id, name)

    async def stream_closed(self, run_id: str, name: str) -> bool:
        return self._t.streams.is_closed(run_id, name)

    # ------------------------------------------------------------ retention

    async def prunable(
        self, closed_before: datetime, limit: int, *, status: types.RunStatus | None = None
    ) -> list[str]:
        return self._t.runs.closed_before(closed_before, limit, status)

    async def release_lapsed_claims(self) -> None:
        self._t.claims.release_lapsed(self.now)

    async def retire_claims(self, run_ids: Sequence[str], *, release: bool) -> None:
        statuses = {}
        for run_id in run_ids:
            run = self._t.runs.get(run_id)
            assert run is not None
            statuses[run_id] = run.status
        self._t.claims.retire(statuses, release=release)

    async def release_tombstones(self) -> None:
        self._t.claims.release_tombstones()

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        for run_id in run_ids:
            self._t.work.drop_run(run_id)
            self._t.hooks.dispose(run_id)
        self._t.runs.delete(run_ids)
        self._t.streams.forget_runs(run_ids)
        self._t.hooks.forget_runs(run_ids)
        pruned = set(run_ids)
        for key in [key for key in self._t.updates if key[0] in pruned]:
            self._t.journal.pop(self._t.updates, key)

    # ------------------------------------------------------------ schedules

    async def insert_schedule(self, record: types.ScheduleRecord) -> bool:
        return self._t.schedules.insert(record)

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        return self._t.schedules.get(schedule_id)

    async def put_schedule(self, record: types.ScheduleRecord) -> None:
        self._t.schedules.put(record)

    async def get_schedules(self, schedule_ids: Sequence[str]) -> list[types.ScheduleRecord]:
        found = (self._t.schedules.get(schedule_id) for schedule_id in sorted(set(schedule_ids)))
        return [record for record in found if record is not None]

    async def put_schedules(self, records: Sequence[types.ScheduleRecord]) -> None:
        for record in records:
            self._t.schedules.put(record)

    async def existing_runs(self, run_ids: Sequence[str]) -> set[str]:
        return {run_id for run_id in run_ids if self._t.runs.get(run_id) is not None}
