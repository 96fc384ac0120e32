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
from datetime import datetime, timedelta

import msgspec

from worlds._lifecycle import ClosesOnExit
from worlds._signals import SignalHub
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, run_topic
from worlds.query import check as check_filter
from worlds.query import matches as filter_matches
from worlds.semantics import (
    CANCEL_DEADLINE_TIMER,
    RUN_DEADLINE_TIMER,
    apply_to_run,
    decode_cursor,
    encode_cursor,
    index_value,
    lease_deadline,
    matches,
    may_take_over,
    settled,
    work_item_id,
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
    HookReceived,
    HookRecord,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunContinued,
    RunCreated,
    RunPage,
    RunQuery,
    RunRecord,
    RunStatus,
    StepDiscarded,
    StepStarted,
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
class _Run:
    record: RunRecord
    events: list[EventKind] = field(default_factory=list)


class MemoryWorld(ClosesOnExit):
    """A world held in this process's memory; state is lost when it closes."""

    protocol_version = PROTOCOL_VERSION

    def __init__(self, url: str = "memory://", *, clock: Callable[[], datetime] = utcnow) -> None:
        """A fresh, empty world. ``clock`` (aware UTC) lets tests move time by hand."""
        self.url = url
        self._clock = clock
        self._runs: dict[str, _Run] = {}
        self._items: dict[str, _Item] = {}
        self._claims: dict[tuple[str, str], Claim] = {}
        self._released: dict[tuple[str, str], int] = {}
        self._hooks: dict[str, HookRecord] = {}
        self._resumed: dict[tuple[str, str], str] = {}
        self._tokens = itertools.count(1)
        self._hub = SignalHub()

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
        stored = msgspec.structs.replace(event, seq=run.record.last_seq + 1, at=now)
        run.events.append(stored)
        run.record = apply_to_run(run.record, stored)
        if isinstance(stored, AttributeSet) and stored.step is None:
            run.record = msgspec.structs.replace(
                run.record, attributes={**run.record.attributes, stored.key: stored.value}
            )
        if run.record.status.is_closed:
            self._drop_work(run.record.id)
            self._dispose_hooks(run.record.id)
            self._signal(run_topic(run.record.id))
        return stored

    def _dispose_hooks(self, run_id: str) -> None:
        for token in [t for t, hook in self._hooks.items() if hook.run_id == run_id]:
            del self._hooks[token]

    def _try_hook(self, run_id: str, event: HookCreated, now: datetime) -> EventKind:
        held = self._hooks.get(event.token)
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
        held = self._claims.get(key)
        same_step = held is not None and held.run_id == run_id and held.step == event.step
        if held is not None and not same_step:
            return AttributeConflict(
                key=event.key,
                value=event.value,
                holder_run_id=held.run_id,
                step=event.step,
                attempt=event.attempt,
            )
        generation = held.generation if held is not None else self._released.pop(key, 0) + 1
        self._claims[key] = Claim(
            key=event.key,
            value=event.value,
            run_id=run_id,
            generation=generation,
            step=event.step,
            attempt=event.attempt,
        )
        return msgspec.structs.replace(event, generation=generation)

    def _new_run(
        self,
        run_id: str,
        workflow: str,
        args: bytes,
        attributes: dict[str, AttributeValue],
        now: datetime,
    ) -> _Run:
        """Store a pending run and its ``RunCreated``."""
        run = _Run(
            RunRecord(
                id=run_id,
                workflow=workflow,
                status=RunStatus.PENDING,
                created_at=now,
                attributes=dict(attributes),
            )
        )
        self._runs[run_id] = run
        self._append(
            run, RunCreated(workflow=workflow, args=args, attributes=dict(attributes)), now
        )
        return run

    def _continue(self, old: _Run, event: RunContinued, now: datetime) -> None:
        record = old.record
        self._new_run(event.next_run_id, record.workflow, event.args, record.attributes, now)
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id == record.id and claim.step is None:
                self._claims[claim_key] = msgspec.structs.replace(
                    claim, run_id=event.next_run_id, generation=claim.generation + 1
                )
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
        if request.run_id in self._runs:
            raise ValueError(f"run {request.run_id} already exists")
        missing = request.unique - request.attributes.keys()
        if missing:
            raise ValueError(f"unique keys without a value: {sorted(missing)}")
        policy = request.policy
        if policy is not None and policy.key not in request.unique:
            raise ValueError(f"the policy's key {policy.key!r} is not among the unique keys")
        takeovers: list[Claim] = []
        for key in sorted(request.unique):
            value = request.attributes[key]
            held = self._claims.get((key, index_value(value)))
            if held is None:
                continue
            status = self._runs[held.run_id].record.status
            if policy is None or policy.key != key or not may_take_over(policy, status):
                conflict = ClaimConflict(
                    key=key, value=value, holder_run_id=held.run_id, holder_status=status
                )
                return CreateRunResult(conflict=conflict)
            takeovers.append(held)
        now = self._clock()
        superseded = None
        for held in takeovers:
            holder = self._runs[held.run_id]
            if not holder.record.status.is_closed:
                self._append(
                    holder, RunCancelled(reason=f"superseded by run {request.run_id}"), now
                )
                superseded = held.run_id
        run = self._new_run(request.run_id, request.workflow, request.args, request.attributes, now)
        for key in request.unique:
            value = request.attributes[key]
            claim_key = (key, index_value(value))
            held = self._claims.get(claim_key)
            generation = held.generation if held else self._released.pop(claim_key, 0)
            self._claims[claim_key] = Claim(
                key=key, value=value, run_id=request.run_id, generation=generation + 1
            )
        wake = NewWorkItem(kind="workflow", name=request.workflow)
        self._enqueue(request.run_id, wake, "", now, 0)
        if request.timeout_at is not None:
            deadline = NewWorkItem(
                kind="timer",
                name=request.workflow,
                number=RUN_DEADLINE_TIMER,
                available_at=request.timeout_at,
            )
            self._enqueue(request.run_id, deadline, "", now, 0)
        return CreateRunResult(run=run.record, superseded_run_id=superseded)

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        now = self._clock()
        run = self._runs.get(request.run_id)
        if run is None:
            raise LookupError(f"unknown run {request.run_id}")
        if run.record.status.is_closed:
            appended: tuple[EventKind, ...] = ()
            if request.discard is not None:
                appended = (self._append(run, request.discard, now),)
            return CommitResult(ok=False, status=run.record.status, events=appended)
        item = None
        if request.lease is not None:
            item = self._holds(request.lease, request.worker_id, now)
            if item is None or item.run_id != run.record.id:
                discard = request.discard
                lost: tuple[EventKind, ...] = ()
                if discard is not None and not settled(run.events, discard.step, discard.attempt):
                    lost = (self._append(run, discard, now),)
                return CommitResult(
                    ok=False, status=run.record.status, events=lost, lease_lost=True
                )
        if any(isinstance(e, RunContinued) and e.next_run_id in self._runs for e in request.events):
            raise ValueError("continue_as_new names a run id that already exists")
        events = []
        for event in request.events:
            if isinstance(event, AttributeSet) and event.unique:
                event = self._try_claim(run.record.id, event)
            elif isinstance(event, HookCreated):
                event = self._try_hook(run.record.id, event, now)
            events.append(self._append(run, event, now))
            if isinstance(event, RunContinued):
                self._continue(run, event, now)
        leased = []
        if not run.record.status.is_closed:
            if item is not None and request.ack:
                if item.kind == "workflow" and item.rewake:
                    item.owner, item.expires_at, item.rewake = None, None, False
                    item.available_at = now
                    self._signal(WORK_TOPIC)
                else:
                    del self._items[item.id]
            for new in request.schedule:
                got = self._enqueue(
                    run.record.id, new, request.worker_id, now, request.lease_seconds
                )
                if got is not None:
                    leased.append(got)
        return CommitResult(
            ok=True, status=run.record.status, events=tuple(events), leased=tuple(leased)
        )

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run``."""
        run = self._runs.get(run_id)
        if run is None:
            return None
        if not run.record.status.is_closed:
            self._append(run, RunCancelled(reason=reason), self._clock())
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
        received = HookReceived(hook=hook.hook, payload=payload, resume_id=resume_id)
        self._append(self._runs[hook.run_id], received, now)
        self._enqueue(hook.run_id, NewWorkItem(kind="workflow"), "", now, 0)
        return hook.run_id

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
        status = run.record.status
        if status is RunStatus.PENDING:
            self._append(run, RunCancelled(reason=reason), now)
        elif status is RunStatus.RUNNING:
            deadline = now + timedelta(seconds=grace_seconds)
            self._append(run, RunCancelRequested(reason=reason, deadline=deadline), now)
            for item in [i for i in self._items.values() if i.run_id == run_id]:
                if item.kind == "workflow":
                    continue
                del self._items[item.id]
                if item.kind == "step" and item.expires_at is not None and item.expires_at > now:
                    discard = StepDiscarded(
                        step=item.number, attempt=item.attempt, outcome="cancelled"
                    )
                    self._append(run, discard, now)
            self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)
            timer = NewWorkItem(
                kind="timer",
                name=run.record.workflow,
                number=CANCEL_DEADLINE_TIMER,
                available_at=deadline,
            )
            self._enqueue(run_id, timer, "", now, 0)
        return run.record

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

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``."""
        await self._hub.wait(topic, timeout)

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
        return self._claims.get((key, index_value(value)))

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        held = [c for c in self._claims.values() if c.run_id == run_id and c.step is None]
        return sorted(held, key=lambda claim: claim.key)

    # ------------------------------------------------------------------ retention

    async def prune_runs(self, closed_before: datetime, limit: int = 1000) -> list[str]:
        """See ``World.prune_runs``."""
        closed = [
            run.record
            for run in self._runs.values()
            if run.record.closed_at is not None and run.record.closed_at < closed_before
        ]
        if limit <= 0:
            return []
        closed.sort(key=lambda record: (record.closed_at or closed_before, record.id))
        pruned = {record.id for record in closed[:limit]}
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id in pruned:
                del self._claims[claim_key]
                self._released[claim_key] = claim.generation
        for run_id in pruned:
            del self._runs[run_id]
            self._drop_work(run_id)
        self._resumed = {k: r for k, r in self._resumed.items() if r not in pruned}
        return [record.id for record in closed[:limit]]
