"""``memory://``: a world that lives in one process's memory.

The in-memory twin of the durable worlds: same semantics, no durability. Every
operation runs without awaiting in the middle, so on one event loop each is
atomic by construction. Useful for tests and as the reference a third-party
world can read before writing its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import assert_never

import msgspec

from worlds._lifecycle import ClosesOnExit
from worlds._rules import (
    batches,
    cancel,
    children,
    claims,
    commits,
    reopen,
    requests,
    resume,
    runs,
    schedules,
    slots,
    streams,
)
from worlds._signals import SignalHub
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, SCHEDULE_TOPIC, WORK_TOPIC, run_topic
from worlds.query import check as check_filter
from worlds.query import matches as filter_matches
from worlds.semantics import (
    carried_payloads,
    decode_cursor,
    encode_cursor,
    index_value,
    lease_deadline,
    matches,
    settled,
    work_item_id,
    workflow_item_id,
)
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookConflict,
    HookCreated,
    HookDelivery,
    HookReceived,
    HookRecord,
    HookStartResult,
    NewWorkItem,
    RunCancelled,
    RunContinued,
    RunPage,
    RunQuery,
    RunRecord,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    SlotAcquired,
    SlotRequested,
    StepStarted,
    StreamChunk,
    WorkItem,
    WorkKind,
    utcnow,
)

__all__ = ["MemoryWorld"]


@dataclass
class _Item:
    id: str
    run_id: str
    kind: WorkKind
    name: str
    number: int
    attempt: int
    payload: bytes
    available_at: datetime
    owner: str | None = None
    token: int = 0
    expires_at: datetime | None = None
    rewake: bool = False
    ever_leased: bool = False


@dataclass
class _Pair:
    """A limited pair's rows: holders and waiters, each in arrival order."""

    holders: dict[slots.Waiter, Slot] = field(default_factory=dict)
    waiters: dict[slots.Waiter, Slot] = field(default_factory=dict)


@dataclass
class _Run:
    record: RunRecord
    events: list[EventKind] = field(default_factory=list)


def _slot_order(slot: Slot) -> tuple[bool, int]:
    """Holders first, then waiters, each in arrival order."""
    return (not slot.holding, slot.position)


class MemoryWorld(ClosesOnExit):
    """A world held in this process's memory; state is lost when it closes."""

    protocol_version = PROTOCOL_VERSION

    def __init__(
        self,
        url: str = "memory://",
        *,
        clock: Callable[[], datetime] = utcnow,
        create: bool = True,
        shared: bool = False,
    ) -> None:
        """A fresh, empty world. ``clock`` (aware UTC) lets tests move time by hand.

        Raises:
            WorldMisconfiguredError: ``create=False`` (a memory world is always
                new, so it never already exists) or ``shared=True`` (it is
                thrown away with this process); use an SQLite or PostgreSQL world.
        """
        if not create or shared:
            need = "an existing world" if not create else "a world that outlives this process"
            raise WorldMisconfiguredError(
                f"{url} is a new, empty world held in this process's memory and thrown "
                f"away when it exits, but {need} is needed here: use sqlite:///path.db "
                "or postgresql://..."
            )
        self.url = url
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._items: dict[str, _Item] = {}
        self._claims: dict[tuple[str, str], Claim] = {}
        self._released: dict[tuple[str, str], int] = {}
        self._hooks: dict[str, HookRecord] = {}
        self._resumed: dict[tuple[str, str], str] = {}
        self._streams: dict[tuple[str, str], list[StreamChunk]] = {}
        self._tokens = itertools.count(1)
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._run_pairs: dict[str, list[tuple[tuple[str, str], int]]] = {}
        """By run: each (pair, hold number) it holds a slot of or waits in."""
        self._positions = itertools.count(1)
        self._hub = SignalHub()
        self._schedules: dict[str, ScheduleRecord] = {}
        self._schedule_leases: dict[str, datetime] = {}

    async def close(self) -> None:
        """Nothing to release; present for the protocol."""

    async def migrate(self) -> int:
        """Nothing to migrate: the memory world has no schema."""
        return 0

    async def info(self) -> dict[str, str | int]:
        """Scheme and run counts."""
        counts: dict[str, str | int] = {"scheme": "memory", "schema_version": 0}
        for run in self._runs.values():
            key = f"runs.{run.record.status.value}"
            counts[key] = int(counts.get(key, 0)) + 1
        return counts

    # ------------------------------------------------------------------ helpers

    def _signal(self, topic: str) -> None:
        self._hub.signal(topic)

    def _append(self, run: _Run, event: EventKind, now: datetime) -> EventKind:
        record, stored = runs.stamped(run.record, event, now)
        self._store(run, record, stored)
        return stored

    def _store(self, run: _Run, record: RunRecord, stored: EventKind) -> None:
        """Keep ``stored``, already numbered, and ``record``, the run after it."""
        run.events.append(stored)
        run.record = record
        if run.record.status.is_closed:
            self._drop_work(run.record.id)
            if not isinstance(stored, RunContinued):  # ``_continue`` moves them
                self._dispose_hooks(run.record.id)
                self._release_slots(run.record.id)
                self._close_claims(run.record)
            self._signal(run_topic(run.record.id))
            if isinstance(stored, runs.CLOSING_EVENTS):
                self._after_close(run.record, stored)

    def _after_close(self, record: RunRecord, closing: EventKind) -> None:
        """Tell the parent its child closed; cancel the children that close with it."""
        notice = children.closed_notice(record, closing)
        if notice is not None:
            parent = self._runs.get(notice.parent_run_id)
            if parent is not None and children.accepts_notice(parent.record):
                self._append(parent, notice.event, closing.at)
                self._enqueue(parent.record.id, NewWorkItem(kind="workflow"), "", closing.at, 0)
        if children.cascades(record):
            reason = children.cascade_reason(record)
            for child in list(self._runs.values()):
                if children.cancels_with_parent(child.record, record.id):
                    self._append(child, RunCancelled(reason=reason), closing.at)

    def _close_claims(self, record: RunRecord) -> None:
        """Apply each claim's reuse window now that its holder closed."""
        assert record.closed_at is not None
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id != record.id or (claim.ttl is None and not claim.release_on):
                continue
            fate = claims.on_close(record.status, record.closed_at, claim.ttl, claim.release_on)
            if fate == "release":
                del self._claims[claim_key]
                self._released[claim_key] = claim.generation
            elif fate is not None:
                self._claims[claim_key] = msgspec.structs.replace(claim, lapses_at=fate)

    def _release_slots(self, run_id: str) -> None:
        """Drop the closed run's slots and places in line; promote whom that admits."""
        self._drop_slots(run_id, self._run_pairs.pop(run_id, []))

    def _drop_slots(self, run_id: str, rows: list[tuple[tuple[str, str], int]]) -> None:
        """Drop ``rows`` (pair, hold) of ``run_id``; promote whom that admits."""
        freed = []
        for pair, hold in rows:
            at = self._pairs[pair]
            at.holders.pop((run_id, hold), None)
            at.waiters.pop((run_id, hold), None)
            freed.append(pair)
        slots.drive(slots.promote_flow(freed), self._promotion_step)
        for pair in freed:
            left = self._pairs.get(pair)
            if left is not None and not left.holders and not left.waiters:
                del self._pairs[pair]

    def _promotion_step(self, need: slots.Need) -> object:
        match need:
            case slots.Head(pair=pair):
                rows = self._pairs.get(pair)
                return next(iter(rows.waiters), None) if rows is not None else None
            case slots.Views(run_id=run_id, hold=hold):
                views = []
                for pair, row_hold in self._run_pairs.get(run_id, []):
                    rows = self._pairs[pair]
                    slot = rows.waiters.get((run_id, hold))
                    if row_hold != hold or slot is None:
                        continue
                    first = next(iter(rows.waiters))
                    views.append(slots.PairView(pair, slot.limit, len(rows.holders), first))
                return views
            case slots.Promote(run_id=run_id, pairs=pairs, hold=hold):
                for pair in pairs:
                    rows = self._pairs[pair]
                    slot = rows.waiters.pop((run_id, hold))
                    rows.holders[(run_id, hold)] = msgspec.structs.replace(slot, holding=True)
                now = self._clock()
                if hold:
                    self._append(self._runs[run_id], SlotAcquired(hold=hold), now)
                self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)
                return None
            case _:
                assert_never(need)

    def _move_hooks(self, old: _Run, new: _Run, event: RunContinued, now: datetime) -> None:
        """Hand ``old``'s tokens, unbound, and their unread payloads to ``new``."""
        held = [hook for hook in self._hooks.values() if hook.run_id == old.record.id]
        for received in carried_payloads(old.events, held, event):
            self._append(new, received, now)
        for hook in held:
            self._hooks[hook.token] = msgspec.structs.replace(hook, run_id=new.record.id, hook=0)
        tokens = {hook.token for hook in held}
        for key, run_id in self._resumed.items():
            if run_id == old.record.id and key[0] in tokens:
                self._resumed[key] = new.record.id

    def _dispose_hooks(self, run_id: str) -> None:
        for token in [t for t, hook in self._hooks.items() if hook.run_id == run_id]:
            del self._hooks[token]

    def _try_hook(self, run_id: str, event: HookCreated, now: datetime) -> EventKind:
        held = self._hooks.get(event.token)
        if held is not None and held.run_id == run_id and held.hook == 0:
            self._hooks[event.token] = msgspec.structs.replace(
                held, hook=event.hook, attributes=dict(event.attributes)
            )
            return event
        if held is not None:
            return HookConflict(hook=event.hook, token=event.token, holder_run_id=held.run_id)
        self._hooks[event.token] = HookRecord(
            token=event.token,
            run_id=run_id,
            hook=event.hook,
            attributes=dict(event.attributes),
            created_at=now,
        )
        return event

    def _drop_work(self, run_id: str) -> None:
        for item_id in [i.id for i in self._items.values() if i.run_id == run_id]:
            del self._items[item_id]

    def _try_claim(self, run_id: str, event: AttributeSet) -> EventKind:
        key = (event.key, index_value(event.value))
        generation = claims.on_attribute_set(self._held(key), run_id, event, self._clock())
        if isinstance(generation, AttributeConflict):
            return generation
        self._released.pop(key, None)
        self._claims[key] = Claim(
            key=event.key,
            value=event.value,
            run_id=run_id,
            generation=generation,
            step=event.step,
            attempt=event.attempt,
            ttl=event.ttl,
            release_on=event.release_on,
        )
        return msgspec.structs.replace(event, generation=generation)

    def _held(self, key: tuple[str, str]) -> claims.HeldClaim | None:
        """The claim stored for ``key``, or its tombstone once its run was pruned."""
        held = self._claims.get(key)
        if held is not None:
            return claims.HeldClaim(
                held.run_id, held.generation, held.step, held.lapses_at, held.pruned_status
            )
        if key in self._released:
            return claims.HeldClaim(None, self._released[key])
        return None

    def _new_run(
        self,
        run_id: str,
        workflow: str,
        args: bytes,
        attributes: dict[str, AttributeValue],
        now: datetime,
    ) -> _Run:
        """Store a pending run and its ``RunCreated``."""
        run = _Run(runs.new_run(run_id, workflow, attributes, now))
        run.events.append(runs.created_event(workflow, args, attributes, now))
        self._runs[run_id] = run
        return run

    def _continue(self, old: _Run, event: RunContinued, now: datetime) -> None:
        record = old.record
        new = self._new_run(event.next_run_id, record.workflow, event.args, record.attributes, now)
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id == record.id and claim.step is None:
                generation = claims.next_generation(self._held(claim_key))
                self._claims[claim_key] = msgspec.structs.replace(
                    claim, run_id=event.next_run_id, generation=generation
                )
        self._move_hooks(old, new, event, now)
        rows = self._run_pairs.pop(record.id, [])
        moved = [(pair, hold) for pair, hold in rows if hold == 0]
        for pair, _ in moved:
            at = self._pairs[pair]
            slot = at.holders.pop((record.id, 0))
            at.holders[(event.next_run_id, 0)] = msgspec.structs.replace(
                slot, run_id=event.next_run_id
            )
        if moved:
            self._run_pairs[event.next_run_id] = moved
        self._drop_slots(record.id, [(pair, hold) for pair, hold in rows if hold != 0])
        self._enqueue(event.next_run_id, NewWorkItem(kind="workflow"), "", now, 0)

    def _lease_item(self, item: _Item, worker_id: str, now: datetime, seconds: float) -> WorkItem:
        if item.kind == "step" and item.ever_leased:
            item.attempt += 1
        item.owner, item.token = worker_id, next(self._tokens)
        item.expires_at = lease_deadline(now, seconds)
        item.ever_leased, item.rewake = True, False
        if item.kind == "step":
            self._append(
                self._runs[item.run_id], StepStarted(step=item.number, attempt=item.attempt), now
            )
        return WorkItem(
            id=item.id,
            run_id=item.run_id,
            kind=item.kind,
            name=item.name,
            number=item.number,
            attempt=item.attempt,
            payload=item.payload,
            token=item.token,
            lease_expires_at=item.expires_at,
        )

    def _enqueue(
        self, run_id: str, new: NewWorkItem, worker_id: str, now: datetime, seconds: float
    ) -> WorkItem | None:
        item_id = work_item_id(run_id, new)
        available_at = new.available_at or now
        existing = self._items.get(item_id)
        if existing is not None and new.kind == "workflow":
            if existing.owner is not None and existing.expires_at and existing.expires_at > now:
                existing.rewake = True
                return None
            existing.available_at = min(existing.available_at, available_at)
            item = existing
        else:
            item = _Item(
                id=item_id,
                run_id=run_id,
                kind=new.kind,
                name=self._runs[run_id].record.workflow if new.kind == "workflow" else new.name,
                number=new.number,
                attempt=new.attempt,
                payload=new.payload,
                available_at=available_at,
            )
            self._items[item_id] = item
        if new.lease and item.available_at <= now:
            return self._lease_item(item, worker_id, now, seconds)
        self._signal(WORK_TOPIC)
        return None

    def _holds(self, lease: WorkItem, worker_id: str, now: datetime) -> _Item | None:
        item = self._items.get(lease.id)
        if item is None or item.owner != worker_id or item.token != lease.token:
            return None
        return item

    # ------------------------------------------------------------------ runs

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run`` and ``StartPolicy``."""
        requests.check_create(request)
        if request.run_id in self._runs:
            raise requests.run_exists(request.run_id)
        taken: dict[tuple[str, str], tuple[str, claims.Takeover]] = {}
        for key in sorted(request.unique):
            value = request.attributes[key]
            claim_key = (key, index_value(value))
            held = self._claims.get(claim_key)
            if held is None or claims.is_free(self._held(claim_key), self._clock()):
                continue
            pruned = held.pruned_status is not None
            status = held.pruned_status if pruned else self._runs[held.run_id].record.status
            holder = (held.run_id, held.generation)
            if request.debounce is not None and request.debounce.key == key:
                debounced = self._debounce(request, held, pruned)
                if isinstance(debounced, CreateRunResult):
                    return debounced
                taken[claim_key] = (held.run_id, debounced)
                continue
            takeover = claims.on_create(
                request.policy, key, value, holder, status, request.run_id, pruned
            )
            if isinstance(takeover, ClaimConflict):
                return CreateRunResult(conflict=takeover)
            taken[claim_key] = (held.run_id, takeover)
        task = runs.first_task_commit(request)
        if task is not None:
            for successor in commits.successors(task):
                if successor in self._runs:
                    raise requests.successor_exists(successor)
        admitted = self._admit(request)
        if isinstance(admitted, ClaimConflict):
            return CreateRunResult(conflict=admitted)
        now = self._clock() if request.first is None or task is None else request.first.at
        superseded = None
        for holder_id, takeover in taken.values():
            if takeover.cancel_reason is not None:
                cancelled = RunCancelled(reason=takeover.cancel_reason)
                self._append(self._runs[holder_id], cancelled, now)
                superseded = holder_id
        run = self._new_run(request.run_id, request.workflow, request.args, request.attributes, now)
        for key in request.unique:
            value = request.attributes[key]
            claim_key = (key, index_value(value))
            if claim_key in taken:
                generation = taken[claim_key][1].generation
            else:
                generation = claims.next_generation(self._held(claim_key))
            self._released.pop(claim_key, None)
            window = request.windows.get(key)
            self._claims[claim_key] = Claim(
                key=key,
                value=value,
                run_id=request.run_id,
                generation=generation,
                ttl=None if window is None else window.ttl,
                release_on=frozenset() if window is None else window.release_on,
            )
        self._take_slots(request, holding=admitted == "hold")
        deadline = runs.deadline_item(request)
        if deadline is not None:
            self._enqueue(request.run_id, deadline, "", now, 0)
        if task is not None:
            first = await self.commit(task)
            return CreateRunResult(run=run.record, superseded_run_id=superseded, first=first)
        leased = None
        if admitted == "hold":
            eager = runs.runs_ahead(request)
            start_at = request.start_at
            if request.debounce is not None:
                start_at = claims.first_start(request.debounce, now)
            wake = NewWorkItem(
                kind="workflow", name=request.workflow, available_at=start_at, lease=eager
            )
            owner = request.lease_to or "" if eager else ""
            leased = self._enqueue(request.run_id, wake, owner, now, request.lease_seconds)
        return CreateRunResult(run=run.record, superseded_run_id=superseded, leased=leased)

    def _debounce(
        self, request: CreateRunRequest, held: Claim, pruned: bool
    ) -> CreateRunResult | claims.Takeover:
        """Debounce the pending holder (new arguments, later start), or take the pair over."""
        assert request.debounce is not None
        now = self._clock()
        run = None if pruned else self._runs[held.run_id]
        item = None if run is None else self._items.get(workflow_item_id(held.run_id))
        untouched = (
            run is not None and run.record.last_seq == 1 and (item is None or not item.ever_leased)
        )
        decided = claims.debounce(
            request.debounce,
            now,
            None if run is None else run.record.status,
            None if run is None else run.record.created_at,
            untouched,
            claims.HeldClaim(held.run_id, held.generation),
        )
        if isinstance(decided, claims.Takeover):
            return decided
        assert run is not None
        record = run.record
        run.events[0] = runs.created_event(
            record.workflow, request.args, record.attributes, record.created_at
        )
        if item is not None:
            item.available_at = decided.start_at
            self._signal(WORK_TOPIC)
        return CreateRunResult(run=record, debounced=True)

    def _admit(self, request: CreateRunRequest) -> str | ClaimConflict:
        """``slots.admit`` over the request's limited pairs as they are now."""
        states = {}
        for key in request.limits:
            rows = self._pairs.get((key, index_value(request.attributes[key])), _Pair())
            states[key] = self._pair_state(rows)
        return slots.admit(request, states)

    @staticmethod
    def _pair_state(rows: _Pair) -> slots.PairState:
        someone = next(iter(rows.holders), None) or next(iter(rows.waiters), None)
        name = None if someone is None else someone[0]
        return slots.PairState(len(rows.holders), len(rows.waiters), name)

    def _acquire(self, run_id: str, event: SlotRequested) -> SlotRequested:
        """A ``hold``'s row at its pair: the slot if ``slots.admit_hold`` says so, else in line."""
        pair = (event.key, index_value(event.value))
        rows = self._pairs.setdefault(pair, _Pair())
        acquired = slots.admit_hold(self._pair_state(rows), event.limit)
        slot = Slot(
            key=event.key,
            value=event.value,
            run_id=run_id,
            limit=event.limit,
            holding=acquired,
            position=next(self._positions),
            hold=event.hold,
        )
        (rows.holders if acquired else rows.waiters)[(run_id, event.hold)] = slot
        self._run_pairs.setdefault(run_id, []).append((pair, event.hold))
        return msgspec.structs.replace(event, acquired=acquired)

    def _release_hold(self, run_id: str, hold: int) -> None:
        """Drop hold ``hold`` of ``run_id`` (slot or place in line); promote whom that admits."""
        rows = self._run_pairs.get(run_id, [])
        gone = [(pair, number) for pair, number in rows if number == hold]
        self._run_pairs[run_id] = [row for row in rows if row[1] != hold]
        if not self._run_pairs[run_id]:
            del self._run_pairs[run_id]
        self._drop_slots(run_id, gone)

    def _take_slots(self, request: CreateRunRequest, *, holding: bool) -> None:
        """The new run's row at each of its limited pairs: a slot, or a place in line."""
        position = next(self._positions)
        for key, limit in sorted(request.limits.items()):
            value = request.attributes[key]
            pair = (key, index_value(value))
            slot = Slot(
                key=key,
                value=value,
                run_id=request.run_id,
                limit=limit.limit,
                holding=holding,
                position=position,
            )
            rows = self._pairs.setdefault(pair, _Pair())
            (rows.holders if holding else rows.waiters)[(request.run_id, 0)] = slot
            self._run_pairs.setdefault(request.run_id, []).append((pair, 0))

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        now = self._clock()
        run = self._runs.get(request.run_id)
        if run is None:
            raise LookupError(f"unknown run {request.run_id}")
        if run.record.status.is_closed:
            if request.discard is None:
                return commits.closed(run.record.status)
            stored = self._append(run, request.discard, now)
            return commits.closed(run.record.status, stored)
        item = None
        if request.lease is not None:
            item = self._holds(request.lease, request.worker_id, now)
            if item is None or item.run_id != run.record.id:
                current = self._items.get(request.lease.id)
                holder = None if current is None else current.owner
                discard = request.discard
                if discard is None or settled(run.events, discard.step, discard.attempt):
                    return commits.lost(run.record.status, holder)
                return commits.lost(run.record.status, holder, self._append(run, discard, now))
        if request.expect_seq is not None:
            later = [event for event in run.events if event.seq >= request.expect_seq]
            if commits.stale(request, later):
                return commits.stale_result(run.record.status)
        for successor in commits.successors(request):
            if successor in self._runs:
                raise requests.successor_exists(successor)
        held = None if item is None else (item.kind, item.rewake)
        flow = commits.commit_flow(run.record, request, now, held)
        reply: object = None
        while True:
            try:
                need = flow.send(reply)
            except StopIteration as stop:
                done: commits.Committed = stop.value
                return done.result
            reply = None
            if isinstance(need, commits.Settle):
                if isinstance(need.event, AttributeSet):
                    reply = self._try_claim(need.run_id, need.event)
                else:
                    reply = self._try_hook(need.run_id, need.event, now)
            elif isinstance(need, commits.Acquire):
                reply = self._acquire(need.run_id, need.event)
            elif isinstance(need, commits.Append):
                self._store(run, need.run, need.event)
            elif isinstance(need, commits.Release):
                self._release_hold(need.run_id, need.hold)
            elif isinstance(need, commits.Continue):
                self._continue(run, need.event, now)
            elif isinstance(need, commits.Stream):
                self._stream(need.run_id, need.event.name, [need.event.data], now)
            elif isinstance(need, commits.Ack):
                assert item is not None
                if need.action == "rewake":
                    item.owner, item.expires_at, item.rewake = None, None, False
                    item.available_at = now
                    self._signal(WORK_TOPIC)
                else:
                    del self._items[item.id]
            elif isinstance(need, commits.Enqueue):
                new, seconds = need.new, request.lease_seconds
                got = self._enqueue(run.record.id, new, request.worker_id, now, seconds)
                reply = (run.record, got)
            else:
                assert_never(need)

    async def commit_many(self, requests: Sequence[CommitRequest]) -> list[batches.Outcome]:
        """See ``World.commit_many``: each request as by ``commit``, at once (nothing
        else runs in between, and this world has nothing to make durable)."""
        return await batches.one_by_one(requests, self.commit)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run``."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        event = cancel.cancel_now(run.record.status, reason)
        if event is not None:
            self._append(run, event, self._clock())
        return run.record

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``."""
        if resume_id is not None and (token, resume_id) in self._resumed:
            return self._resumed[(token, resume_id)]
        hook = self._hooks.get(token)
        if hook is None:
            return None
        if resume_id is not None:
            self._resumed[(token, resume_id)] = hook.run_id
        now = self._clock()
        token_if_unbound = "" if hook.hook else token
        received = HookReceived(
            hook=hook.hook, payload=payload, resume_id=resume_id, token=token_if_unbound
        )
        self._append(self._runs[hook.run_id], received, now)
        self._enqueue(hook.run_id, NewWorkItem(kind="workflow"), "", now, 0)
        return hook.run_id

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """See ``World.start_or_resume_hook``."""
        key = resume.check_request(request)
        requests.check_create(request)
        if delivery.resume_id is not None:
            seen = self._resumed.get((delivery.token, delivery.resume_id))
            if seen is not None:
                return HookStartResult(run_id=seen)
        held = self._claims.get((key, index_value(request.attributes[key])))
        status = None if held is None else self._runs[held.run_id].record.status
        if held is not None and resume.route(status) == "deliver":
            return self._deliver(held.run_id, delivery, None)
        hook = self._hooks.get(delivery.token)
        if hook is not None:  # another run holds the token: create nothing
            return HookStartResult(run_id=hook.run_id, hook_holder=hook.run_id)
        created = await self.create_run(request)
        if created.run is None:
            assert created.conflict is not None
            return HookStartResult(run_id=created.conflict.holder_run_id)
        return self._deliver(request.run_id, delivery, created.run)

    def _deliver(
        self, run_id: str, delivery: HookDelivery, created: RunRecord | None
    ) -> HookStartResult:
        now = self._clock()
        hook = self._hooks.get(delivery.token)
        if hook is None:
            hook = HookRecord(token=delivery.token, run_id=run_id, hook=0, created_at=now)
            self._hooks[delivery.token] = hook
        elif hook.run_id != run_id:
            return HookStartResult(run_id=run_id, hook_holder=hook.run_id)
        if delivery.resume_id is not None:
            self._resumed[(delivery.token, delivery.resume_id)] = run_id
        run = self._runs[run_id]
        self._append(run, resume.received(hook.hook, delivery), now)
        self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)
        record = None if created is None else run.record
        return HookStartResult(run_id=run_id, created=created is not None, run=record)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        hooks = [h for h in self._hooks.values() if run_id is None or h.run_id == run_id]
        return sorted(hooks, key=lambda hook: (hook.created_at, hook.run_id, hook.hook))

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        now = self._clock()
        plan = cancel.plan_cancel(
            run.record.status, run.record.workflow, reason, now, grace_seconds
        )
        if plan.event is not None:
            self._append(run, plan.event, now)
        if plan.timer is not None:
            for item in sorted(
                (i for i in self._items.values() if i.run_id == run_id and i.kind != "workflow"),
                key=lambda i: (i.kind, i.number),
            ):
                del self._items[item.id]
                in_flight = item.expires_at is not None and item.expires_at > now
                discard = cancel.discarded(item.kind, item.number, item.attempt, in_flight)
                if discard is not None:
                    self._append(run, discard, now)
            self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)
            self._enqueue(run_id, plan.timer, "", now, 0)
        return run.record

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        """See ``World.reopen_run``."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        plan = reopen.plan_reopen(run.record, run.events, by)
        if plan.event is None:
            return run.record
        now = self._clock()
        self._append(run, plan.event, now)
        for new in plan.work:
            self._enqueue(run_id, new, "", now, 0)
        return run.record

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        """See ``World.fork_run``."""
        source = self._runs.get(source_run_id)
        if source is None:
            return None
        if run_id in self._runs:
            raise requests.run_exists(run_id)
        plan = reopen.plan_fork(source.record, source.events, from_step, by)
        now = self._clock()
        fork = self._new_run(run_id, source.record.workflow, plan.args, plan.attributes, now)
        for event in plan.events:
            self._append(fork, event, now)
        for new in plan.work:
            self._enqueue(run_id, new, "", now, 0)
        return fork.record

    # ------------------------------------------------------------------ streams

    def _stream(self, run_id: str, name: str, chunks: Sequence[bytes], now: datetime) -> int:
        stream = self._streams.setdefault((run_id, name), [])
        first = len(stream)
        stream.extend(
            StreamChunk(offset=first + n, data=data, at=now) for n, data in enumerate(chunks)
        )
        self._signal(run_topic(run_id))
        return first

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``."""
        streams.check_name(name)
        run = self._runs.get(run_id)
        if not streams.accepts(None if run is None else run.record.status):
            return None
        return self._stream(run_id, name, chunks, self._clock())

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """See ``World.read_stream``."""
        stream = self._streams.get((run_id, name), [])
        return stream[max(start, 0) : max(start, 0) + max(limit, 0)]

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``."""
        now = self._clock()
        due = [
            item
            for item in self._items.values()
            if item.name in names
            and item.available_at <= now
            and (item.owner is None or (item.expires_at is not None and item.expires_at <= now))
        ]
        due.sort(key=lambda item: item.available_at)
        return [self._lease_item(item, worker_id, now, lease_seconds) for item in due[:limit]]

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        now = self._clock()
        alive = []
        for lease in items:
            item = self._holds(lease, worker_id, now)
            if item is not None:
                item.expires_at = lease_deadline(now, lease_seconds)
            alive.append(item is not None)
        return alive

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        now = self._clock()
        for lease in items:
            item = self._holds(lease, worker_id, now)
            if item is not None:
                item.owner, item.expires_at = None, None
        self._signal(WORK_TOPIC)

    def now(self) -> datetime:
        """See ``World.now``: the clock this world was given."""
        return self._clock()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``."""
        await self._hub.wait(topic, timeout)

    def next_due(self) -> datetime | None:
        """When the earliest work item nobody holds becomes due; ``None`` if none waits.

        With ``busy()``, what a time-skipping test clock (``workflow.testing``)
        needs: when nothing is busy, moving the clock to ``next_due()`` is the
        only way anything can happen.
        """
        waiting = [item.available_at for item in self._items.values() if item.owner is None]
        return min(waiting, default=None)

    def busy(self) -> bool:
        """True while some work item is due now or leased (a worker is on it)."""
        now = self._clock()
        return any(
            item.available_at <= now or item.owner is not None for item in self._items.values()
        )

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``World.get_run``."""
        run = self._runs.get(run_id)
        return None if run is None else run.record

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``."""
        run = self._runs.get(run_id)
        return [] if run is None else run.events[max(after_seq, 0) :]

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``."""
        if query.limit < 1:
            raise ValueError(f"limit must be >= 1, got {query.limit}")
        after = decode_cursor(query.cursor) if query.cursor else None
        where = query.where
        if where is not None:
            check_filter(where)
        ids = sorted(self._runs, reverse=True)
        found: list[RunRecord] = []
        for run_id in ids:
            if after is not None and run_id >= after:
                continue
            record = self._runs[run_id].record
            if matches(record, query) and (where is None or filter_matches(record, where)):
                found.append(record)
                if len(found) > query.limit:
                    break
        more = len(found) > query.limit
        page = tuple(found[: query.limit])
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        claim_key = (key, index_value(value))
        if claims.is_free(self._held(claim_key), self._clock()):
            return None
        return self._claims[claim_key]

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        rows = self._pairs.get((key, index_value(value)), _Pair())
        return sorted([*rows.holders.values(), *rows.waiters.values()], key=_slot_order)

    async def run_slots(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        found = []
        for pair, hold in self._run_pairs.get(run_id, []):
            rows = self._pairs[pair]
            found.append(rows.holders.get((run_id, hold)) or rows.waiters[(run_id, hold)])
        return sorted(found, key=lambda slot: (slot.key, index_value(slot.value), slot.hold))

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        now = self._clock()
        held = [
            c
            for c in self._claims.values()
            if c.run_id == run_id and not (c.lapses_at is not None and c.lapses_at <= now)
        ]
        return sorted(held, key=lambda claim: (claim.key, index_value(claim.value)))

    # ------------------------------------------------------------------ retention

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_runs``."""
        closed = [
            run.record
            for run in self._runs.values()
            if run.record.closed_at is not None and run.record.closed_at < closed_before
        ]
        if limit <= 0:
            return []
        closed.sort(key=lambda record: (record.closed_at or closed_before, record.id))
        pruned = {record.id: record.status for record in closed[:limit]}
        now = self._clock()
        for claim_key, claim in list(self._claims.items()):
            lapsed = claim.lapses_at is not None and claim.lapses_at <= now
            if lapsed or (claim.run_id in pruned and release_claims):
                del self._claims[claim_key]
                self._released[claim_key] = claim.generation
            elif claim.run_id in pruned:
                tombstone = {"pruned_status": pruned[claim.run_id], "step": None, "attempt": None}
                self._claims[claim_key] = msgspec.structs.replace(claim, **tombstone)
        for run_id in pruned:
            del self._runs[run_id]
            self._drop_work(run_id)
        self._streams = {k: v for k, v in self._streams.items() if k[0] not in pruned}
        self._resumed = {k: r for k, r in self._resumed.items() if r not in pruned}
        return [record.id for record in closed[:limit]]

    # ------------------------------------------------------------------ schedules

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        schedules.check_schedule(record)
        if record.id in self._schedules:
            raise schedules.schedule_exists(record.id)
        stored = schedules.created(record, self._clock())
        self._schedules[record.id] = stored
        self._signal(SCHEDULE_TOPIC)
        return stored

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return self._schedules.get(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        ids = sorted(i for i in self._schedules if after is None or i > after)
        return [self._schedules[i] for i in ids[:limit]]

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        schedules.check_schedule(record)
        stored = self._schedules.get(record.id)
        if stored is None or stored.version != record.version:
            return None
        new = schedules.updated(stored, record, self._clock())
        self._schedules[record.id] = new
        self._schedule_leases.pop(record.id, None)
        self._signal(SCHEDULE_TOPIC)
        return new

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._schedule_leases.pop(schedule_id, None)
        return self._schedules.pop(schedule_id, None) is not None

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        now, wanted = self._clock(), frozenset(names)
        due: list[ScheduleRecord] = []
        later: datetime | None = None
        for record in self._schedules.values():
            if schedules.is_due(record, self._schedule_leases.get(record.id), wanted, now):
                due.append(record)
            elif (
                not record.paused
                and record.workflow in wanted
                and record.wake_at is not None
                and record.wake_at > now
                and (later is None or record.wake_at < later)
            ):
                later = record.wake_at
        due.sort(key=lambda record: (record.wake_at or now, record.id))
        if len(due) > limit:
            later = now
        taken = due[: max(limit, 0)]
        for record in taken:
            self._schedule_leases[record.id] = lease_deadline(now, lease_seconds)
        return ScheduleLease(now=now, schedules=tuple(taken), next_wake_at=later)
