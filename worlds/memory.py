"""``memory://``: a world that lives in one process's memory.

The in-memory twin of the durable worlds: same semantics, no durability. Every
operation runs without awaiting in the middle, so on one event loop each is
atomic by construction. Useful for tests and as the reference a third-party
world can read before writing its own.

The world keeps the runs and their events, and composes small private stores
for the rest: the work queue (``worlds._memory_work``), claims
(``worlds._memory_claims``), flow-control slots (``worlds._memory_slots``), hook
tokens (``worlds._memory_hooks``), streams (``worlds._memory_streams``) and
schedules (``worlds._memory_schedules``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import assert_never

from worlds._lifecycle import ClosesOnExit
from worlds._memory_claims import ClaimStore
from worlds._memory_hooks import HookStore
from worlds._memory_schedules import ScheduleStore
from worlds._memory_slots import SlotStore
from worlds._memory_streams import StreamStore
from worlds._memory_work import WorkQueue
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
    streams,
)
from worlds._signals import SignalHub
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, run_topic
from worlds.query import check as check_filter
from worlds.query import matches as filter_matches
from worlds.semantics import (
    decode_cursor,
    encode_cursor,
    index_value,
    matches,
    settled,
    workflow_item_id,
)
from worlds.types import (
    AttributeSet,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
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
    StepStarted,
    StreamChunk,
    WorkItem,
    utcnow,
)

__all__ = ["MemoryWorld"]


@dataclass
class _Run:
    record: RunRecord
    events: list[EventKind] = field(default_factory=list)


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
        self._work = WorkQueue(self._signal, self._workflow_of, self._step_started)
        self._claims = ClaimStore(clock)
        self._hooks = HookStore()
        self._streams = StreamStore(self._signal)
        self._slots = SlotStore(self._wake)
        self._hub = SignalHub()
        self._schedules = ScheduleStore(clock, self._signal)

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
            self._work.drop(run.record.id)
            if not isinstance(stored, RunContinued):  # ``_continue`` moves them
                self._hooks.dispose(run.record.id)
                self._slots.release(run.record.id)
                self._claims.on_close(run.record)
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

    def _wake(self, run_id: str, hold: int = 0) -> None:
        """Enqueue ``run_id``'s workflow task, due now (after ``SlotAcquired`` for a
        ``hold()`` block just given its slot)."""
        now = self._clock()
        if hold:
            self._append(self._runs[run_id], SlotAcquired(hold=hold), now)
        self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)

    def _move_hooks(self, old: _Run, new: _Run, event: RunContinued, now: datetime) -> None:
        """Hand ``old``'s tokens, unbound, and their unread payloads to ``new``."""
        for received in self._hooks.carry(old.record.id, old.events, new.record.id, event):
            self._append(new, received, now)

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
        self._claims.carry(record.id, event.next_run_id)
        self._move_hooks(old, new, event, now)
        self._slots.move(record.id, event.next_run_id)
        self._enqueue(event.next_run_id, NewWorkItem(kind="workflow"), "", now, 0)

    def _enqueue(
        self, run_id: str, new: NewWorkItem, worker_id: str, now: datetime, seconds: float
    ) -> WorkItem | None:
        return self._work.enqueue(run_id, new, worker_id, now, seconds)

    def _workflow_of(self, run_id: str) -> str:
        return self._runs[run_id].record.workflow

    def _step_started(self, run_id: str, event: StepStarted, now: datetime) -> None:
        self._append(self._runs[run_id], event, now)

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
            if held is None or claims.is_free(self._claims.held(claim_key), self._clock()):
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
        admitted = self._slots.admit(request)
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
        self._claims.take(request, {pair: took.generation for pair, (_, took) in taken.items()})
        self._slots.take(request, holding=admitted == "hold")
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
        item = None if run is None else self._work.items.get(workflow_item_id(held.run_id))
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
            item = self._work.holds(request.lease, request.worker_id, now)
            if item is None or item.run_id != run.record.id:
                current = self._work.items.get(request.lease.id)
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
                    reply = self._claims.try_set(need.run_id, need.event)
                else:
                    reply = self._hooks.try_bind(need.run_id, need.event, now)
            elif isinstance(need, commits.Acquire):
                reply = self._slots.acquire(need.run_id, need.event)
            elif isinstance(need, commits.Append):
                self._store(run, need.run, need.event)
            elif isinstance(need, commits.Release):
                self._slots.release_hold(need.run_id, need.hold)
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
                    del self._work.items[item.id]
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
        if resume_id is not None and (token, resume_id) in self._hooks.resumed:
            return self._hooks.resumed[(token, resume_id)]
        hook = self._hooks.tokens.get(token)
        if hook is None:
            return None
        if resume_id is not None:
            self._hooks.resumed[(token, resume_id)] = hook.run_id
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
            seen = self._hooks.resumed.get((delivery.token, delivery.resume_id))
            if seen is not None:
                return HookStartResult(run_id=seen)
        held = self._claims.get((key, index_value(request.attributes[key])))
        status = None if held is None else self._runs[held.run_id].record.status
        if held is not None and resume.route(status) == "deliver":
            return self._deliver(held.run_id, delivery, None)
        hook = self._hooks.tokens.get(delivery.token)
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
        hook = self._hooks.tokens.get(delivery.token)
        if hook is None:
            hook = HookRecord(token=delivery.token, run_id=run_id, hook=0, created_at=now)
            self._hooks.tokens[delivery.token] = hook
        elif hook.run_id != run_id:
            return HookStartResult(run_id=run_id, hook_holder=hook.run_id)
        if delivery.resume_id is not None:
            self._hooks.resumed[(delivery.token, delivery.resume_id)] = run_id
        run = self._runs[run_id]
        self._append(run, resume.received(hook.hook, delivery), now)
        self._enqueue(run_id, NewWorkItem(kind="workflow"), "", now, 0)
        record = None if created is None else run.record
        return HookStartResult(run_id=run_id, created=created is not None, run=record)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        return self._hooks.list(run_id)

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
                (
                    i
                    for i in self._work.items.values()
                    if i.run_id == run_id and i.kind != "workflow"
                ),
                key=lambda i: (i.kind, i.number),
            ):
                del self._work.items[item.id]
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
        return self._streams.append(run_id, name, chunks, now)

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
        return self._streams.read(run_id, name, start, limit)

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``."""
        return self._work.lease(
            worker_id, self._clock(), names=names, limit=limit, lease_seconds=lease_seconds
        )

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        return self._work.renew(worker_id, items, lease_seconds, self._clock())

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        self._work.release(worker_id, items, self._clock())

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
        return self._work.next_due()

    def busy(self) -> bool:
        """True while some work item is due now or leased (a worker is on it)."""
        return self._work.busy(self._clock())

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
        return self._claims.find(key, value)

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        return self._slots.at_pair(key, value)

    async def run_slots(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        return self._slots.of_run(run_id)

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        return self._claims.of_run(run_id)

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
        self._claims.prune(pruned, release_claims)
        for run_id in pruned:
            del self._runs[run_id]
            self._work.drop(run_id)
        self._streams.forget_runs(pruned)
        self._hooks.forget_runs(pruned)
        return [record.id for record in closed[:limit]]

    # ------------------------------------------------------------------ schedules

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        return await self._schedules.create(record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return await self._schedules.get(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        return await self._schedules.list(after=after, limit=limit)

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        return await self._schedules.update(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        return await self._schedules.delete(schedule_id)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        return await self._schedules.lease(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )
