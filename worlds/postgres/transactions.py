"""One write transaction of the PostgreSQL world (private to ``worlds.postgres``).

``Tx`` holds the transaction's connection, clock, queued events and the topics
to notify when it commits; its methods are the steps the world's operations
share: stamping events, saving a run, claims, hooks, continue-as-new and the
work queue.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Generator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, assert_never

import asyncpg
import msgspec

from worlds._rules import cancel, children, claims, commits, requests, resume, runs, slots
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.protocol import WORK_TOPIC, run_topic
from worlds.semantics import (
    carried_payloads,
    index_value,
    lease_deadline,
    work_item_id,
    workflow_item_id,
)

if TYPE_CHECKING:
    from worlds.postgres.connection import Connection
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    ClaimConflict,
    CommitRequest,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookConflict,
    HookCreated,
    HookDelivery,
    HookStartResult,
    NewWorkItem,
    RunCancelled,
    RunContinued,
    RunRecord,
    RunStatus,
    SlotAcquired,
    SlotRequested,
    StepStarted,
    WorkItem,
    utcnow,
)

__all__ = ["Tx", "is_run_id_taken", "new_token"]


def new_token() -> int:
    return secrets.randbits(62) + 1


def is_run_id_taken(exc: asyncpg.exceptions.UniqueViolationError) -> bool:
    """Whether ``exc`` says the run id of a new run is taken."""
    return getattr(exc, "constraint_name", None) in ("runs_pkey", "events_pkey")


class Tx:
    """One write transaction: its connection, clock, pending events and signals."""

    def __init__(
        self, conn: Connection, channel: str | None, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self.conn = conn
        self.channel = channel
        """The work channel, or ``None``: the caller notifies ``signals`` after the commit."""
        self.clock = clock
        """The world's clock (the server's, as the world estimates it)."""
        self.now = clock()
        self.signals: set[str] = set()
        self.pending: dict[str, list[tuple[int, str, bytes]]] = {}
        self.locked_pairs: set[tuple[str, str]] = set()
        """The limited pairs whose advisory locks this transaction holds."""
        self.closing: dict[str, EventKind] = {}

    def tick(self) -> None:
        """Read the clock again, after taking locks, so logs never go back in time."""
        self.now = max(self.now, self.clock())

    def stamp(self, run: RunRecord, event: EventKind) -> tuple[RunRecord, EventKind]:
        """Number and date ``event`` as the next of ``run``; queue its row."""
        run, stored = runs.stamped(run, event, self.now)
        self.queue(run.id, stored)
        return run, stored

    def queue(self, run_id: str, stored: EventKind) -> None:
        """Queue the row of ``stored``, an event of run ``run_id`` already numbered."""
        row = (stored.seq, codecs.EVENT_TAGS[type(stored)], codecs.encode(stored))
        self.pending.setdefault(run_id, []).append(row)
        if isinstance(stored, runs.CLOSING_EVENTS):
            self.closing[run_id] = stored

    async def commit(
        self, flow: Generator[commits.Need, Any, commits.Committed], request: CommitRequest
    ) -> commits.Committed:
        """Drive ``commits.commit_flow`` in this transaction: do each step it asks for."""
        reply: object = None
        while True:
            try:
                need = flow.send(reply)
            except StopIteration as stop:
                done: commits.Committed = stop.value
                return done
            reply = None
            if isinstance(need, commits.Settle):
                if isinstance(need.event, AttributeSet):
                    reply = await self.try_claim(need.run_id, need.event)
                else:
                    reply = await self.try_hook(need.run_id, need.event)
            elif isinstance(need, commits.Acquire):
                reply = await self.acquire(need.run_id, need.event)
            elif isinstance(need, commits.Append):
                self.queue(need.run.id, need.event)
            elif isinstance(need, commits.Release):
                await self.release_hold(need.run_id, need.hold)
            elif isinstance(need, commits.Continue):
                await self.continue_run(need.run, need.event)
            elif isinstance(need, commits.Stream):
                await self.stream(need.run_id, need.event.name, [need.event.data])
            elif isinstance(need, commits.Ack):
                assert request.lease is not None
                if need.action == "rewake":
                    await self.conn.execute(sql.REWAKE_ON_ACK, request.lease.id, self.now)
                    self.signals.add(WORK_TOPIC)
                else:
                    await self.conn.execute(sql.DELETE_WORK, request.lease.id)
            elif isinstance(need, commits.Enqueue):
                new, seconds = need.new, request.lease_seconds
                reply = await self.enqueue(need.run, new, request.worker_id, seconds)
            else:
                assert_never(need)

    async def save_run(self, run: RunRecord, attributes: bytes) -> None:
        """Append ``run``'s queued events and store its state (a closed run loses its work)."""
        if run.status.is_closed:
            await self.release_slots(run.id)  # first: its pairs' locks, then its work
            if run.status != RunStatus.CONTINUED:  # its claims moved to the next run
                await self.close_claims(run)
        rows = self.pending.pop(run.id, [])
        await self.conn.execute(sql.SAVE_RUN, *codecs.save_params(run, attributes, rows, self.now))
        if run.status.is_closed:
            self.signals.add(run_topic(run.id))
            closing = self.closing.pop(run.id, None)
            if closing is not None:
                await self._after_close(run, closing)

    async def _after_close(self, run: RunRecord, closing: EventKind) -> None:
        """Tell the parent its child closed; cancel the children that close with it."""
        notice = children.closed_notice(run, closing)
        if notice is not None:
            found = await self.lock_run(notice.parent_run_id)
            if found is not None and children.accepts_notice(found[0]):
                parent, attributes = found
                parent, _ = self.stamp(parent, notice.event)
                parent, _ = await self.enqueue(parent, NewWorkItem(kind="workflow"), "", 0.0)
                await self.save_run(parent, attributes)
        if children.cascades(run):
            reason = children.cascade_reason(run)
            rows = await self.conn.fetch(
                sql.LOCK_OPEN_CHILDREN, children.PARENT_KEY, index_value(run.id)
            )
            self.tick()
            for row in rows:
                child = codecs.run_from_row(row)
                if children.cancels_with_parent(child, run.id):
                    child, _ = self.stamp(child, RunCancelled(reason=reason))
                    await self.save_run(child, row["attributes"])

    async def lock_run(self, run_id: str) -> tuple[RunRecord, bytes] | None:
        """The run and its encoded attributes, locked until the transaction ends."""
        row = await self.conn.fetchrow(sql.LOCK_RUN, run_id)
        self.tick()
        if row is not None and row["last_at"] is not None:
            self.now = max(self.now, row["last_at"])  # never before the log's last event
        return None if row is None else (codecs.run_from_row(row), row["attributes"])

    async def insert_run(
        self,
        run_id: str,
        workflow: str,
        args: bytes,
        attributes: dict[str, AttributeValue],
        *,
        wake: bool = True,
        start_at: datetime | None = None,
    ) -> None:
        """A pending run with its attributes, ``RunCreated`` and (with ``wake``) its
        workflow item, due at ``start_at`` (default: now)."""
        stored = runs.created_event(workflow, args, attributes, self.now)
        keys = list(attributes)
        try:
            await self.conn.execute(
                sql.CREATE_RUN,
                run_id,
                workflow,
                self.now,
                codecs.encode(attributes),
                keys,
                [index_value(attributes[key]) for key in keys],
                codecs.encode(stored),
                workflow_item_id(run_id),
                self.channel,
                (start_at or self.now) if wake else None,
            )
        except asyncpg.exceptions.UniqueViolationError as exc:
            if is_run_id_taken(exc):
                raise requests.run_exists(run_id) from None
            raise
        if wake:
            self.signals.add(WORK_TOPIC)

    async def close_claims(self, run: RunRecord) -> None:
        """Apply the reuse window of each claim ``run`` held, now that it closed."""
        assert run.closed_at is not None
        for row in await self.conn.fetch(sql.WINDOWED_CLAIMS, run.id):
            release_on = claims.decode_release_on(row["release_on"])
            fate = claims.on_close(run.status, run.closed_at, row["ttl"], release_on)
            if fate == "release":
                await self.conn.execute(sql.RELEASE_CLAIM, row["key"], row["ivalue"])
            elif fate is not None:
                await self.conn.execute(sql.SET_LAPSES_AT, row["key"], row["ivalue"], fate)

    async def debounce(self, request: CreateRunRequest) -> CreateRunResult | claims.Takeover | None:
        """A debounced start meets its pair (locked): the pending holder updated (the
        result), a takeover for the new run, or ``None`` (the pair is free)."""
        debounce = request.debounce
        assert debounce is not None
        ivalue = index_value(request.attributes[debounce.key])
        row = await self.conn.fetchrow(sql.LOCK_CLAIM, debounce.key, ivalue)
        held = None if row is None else codecs.held_from_row(row)
        if held is None or claims.is_free(held, self.now):
            return None
        record, item = None, None
        if held.pruned_status is None:
            found = await self.lock_run(str(held.run_id))
            record = None if found is None else found[0]
            if record is not None:
                item = await self.conn.fetchrow(
                    sql.WORKFLOW_ITEM_LEASED, workflow_item_id(record.id)
                )
        untouched = (
            record is not None
            and record.last_seq == 1
            and (item is None or not item["ever_leased"])
        )
        decided = claims.debounce(
            debounce,
            self.now,
            None if record is None else record.status,
            None if record is None else record.created_at,
            untouched,
            held,
        )
        if isinstance(decided, claims.Takeover):
            return decided
        assert record is not None
        created = runs.created_event(
            record.workflow, request.args, record.attributes, record.created_at
        )
        await self.conn.execute(sql.REWRITE_CREATED, record.id, codecs.encode(created))
        if item is not None:
            await self.conn.execute(
                sql.SET_AVAILABLE, workflow_item_id(record.id), decided.start_at
            )
            self.signals.add(WORK_TOPIC)
        return CreateRunResult(run=record, debounced=True)

    async def lock_pairs(self, pairs: list[tuple[str, str]]) -> None:
        """Take the transaction-long locks of limited ``pairs`` (sorted: no deadlock
        between two transactions that each lock theirs at once)."""
        ordered = sorted(set(pairs) - self.locked_pairs)
        if ordered:
            keys, values = [k for k, _ in ordered], [v for _, v in ordered]
            await self.conn.execute(sql.LOCK_PAIRS, keys, values)
            self.locked_pairs.update(ordered)

    async def admit(self, request: CreateRunRequest) -> str | ClaimConflict:
        """Lock the new run's limited pairs and decide with ``slots.admit``."""
        pairs = {key: (key, index_value(request.attributes[key])) for key in request.limits}
        await self.lock_pairs(list(pairs.values()))
        states = {}
        for key, pair in pairs.items():
            row = await self.conn.fetchrow(sql.SLOT_STATE, *pair)
            assert row is not None
            waiting = 0 if row["first_waiter"] is None else 1
            someone = row["holder"] or row["first_waiter"]
            states[key] = slots.PairState(row["holding"], waiting, someone)
        return slots.admit(request, states)

    async def take_slots(self, request: CreateRunRequest, holding: bool) -> None:
        """The new run's row at each of its (locked) limited pairs."""
        keys = sorted(request.limits)
        values = [request.attributes[key] for key in keys]
        await self.conn.execute(
            sql.INSERT_SLOTS,
            keys,
            [index_value(value) for value in values],
            [codecs.encode(value) for value in values],
            request.run_id,
            [request.limits[key].limit for key in keys],
            holding,
        )

    async def release_slots(self, run_id: str) -> None:
        """Drop a closing run's slots and places in line; promote whom that admits."""
        rows = await self.conn.fetch(sql.RUN_SLOT_PAIRS, run_id)
        if not rows:
            return
        freed = [(row["key"], row["ivalue"]) for row in rows]
        await self.lock_pairs(freed)
        await self.conn.execute(sql.DROP_RUN_SLOTS, run_id)
        await self._promote(freed)

    async def acquire(self, run_id: str, event: SlotRequested) -> SlotRequested:
        """A ``hold``'s row at its (locked) pair: the slot if ``slots.admit_hold`` says
        so, else a place in line."""
        pair = (event.key, index_value(event.value))
        await self.lock_pairs([pair])
        row = await self.conn.fetchrow(sql.SLOT_STATE, *pair)
        assert row is not None
        state = slots.PairState(row["holding"], int(row["first_waiter"] is not None), None)
        acquired = slots.admit_hold(state, event.limit)
        value = codecs.encode(event.value)
        params = (*pair, run_id, value, event.limit, acquired, event.hold)
        await self.conn.execute(sql.INSERT_HOLD, *params)
        return msgspec.structs.replace(event, acquired=acquired)

    async def release_hold(self, run_id: str, hold: int) -> None:
        """Drop hold ``hold`` of ``run_id`` (slot or place in line); promote whom that admits."""
        rows = await self.conn.fetch(sql.HOLD_PAIR, run_id, hold)
        freed = [(row["key"], row["ivalue"]) for row in rows]
        await self.lock_pairs(freed)
        await self.conn.execute(sql.DROP_HOLD, run_id, hold)
        await self._promote(freed)

    async def drop_holds(self, run_id: str) -> None:
        """Drop every hold of ``run_id`` (a run continuing as new); promote whom that admits."""
        rows = await self.conn.fetch(sql.RUN_HOLD_PAIRS, run_id)
        freed = [(row["key"], row["ivalue"]) for row in rows]
        if freed:
            await self.lock_pairs(freed)
            await self.conn.execute(sql.DROP_HOLDS, run_id)
            await self._promote(freed)

    async def _promote(self, freed: list[tuple[str, str]]) -> None:
        """Promote whom the ``freed`` pairs (locked) now admit (``slots.promote_flow``)."""
        flow = slots.promote_flow(freed)
        reply: object = None
        while True:
            try:
                need = flow.send(reply)
            except StopIteration:
                return
            reply = await self._promotion_step(need)

    async def _promotion_step(self, need: slots.Need) -> object:
        conn = self.conn
        match need:
            case slots.Head(pair=pair):
                row = await conn.fetchrow(sql.FIRST_WAITER, *pair)
                return None if row is None else (row["run_id"], row["hold"])
            case slots.Views(run_id=run_id, hold=hold):
                rows = await conn.fetch(sql.RUN_WAITING_VIEWS, run_id, hold)
                pairs = [(row["key"], row["ivalue"]) for row in rows]
                if not set(pairs) <= self.locked_pairs:
                    await self.lock_pairs(pairs)  # its other pairs; a deadlock is retried
                    rows = await conn.fetch(sql.RUN_WAITING_VIEWS, run_id, hold)  # under the locks
                views = []
                for row in rows:
                    first_run, first_hold = row["first_waiter"]
                    first = (first_run, int(first_hold))
                    pair = (row["key"], row["ivalue"])
                    views.append(slots.PairView(pair, row["lim"], row["holding"], first))
                return views
            case slots.Promote(run_id=run_id, hold=hold) if hold:
                await conn.execute(sql.PROMOTE_HOLD, run_id, hold)
                found = await self.lock_run(run_id)
                assert found is not None
                run, attributes = found
                run, _ = self.stamp(run, SlotAcquired(hold=hold))
                run, _ = await self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
                await self.save_run(run, attributes)
                return None
            case slots.Promote(run_id=run_id):
                await conn.execute(sql.PROMOTE, run_id, workflow_item_id(run_id), self.now)
                self.signals.add(WORK_TOPIC)
                return None
            case _:
                assert_never(need)

    async def insert_run_claiming(self, request: CreateRunRequest) -> bool:
        """``insert_run`` for ``request``, with its unique pairs claimed and its
        deadline timer, in one call of the schema's ``create_run`` function.

        Returns ``False``, with nothing written, when a pair is held: the caller
        then takes the general path, which decides by the start policy.
        """
        attributes = dict(request.attributes)
        stored = runs.created_event(request.workflow, request.args, attributes, self.now)
        keys, claimed = list(attributes), sorted(request.unique)
        timer = runs.deadline_item(request)
        try:
            await self.conn.execute(
                sql.CREATE_RUN_CLAIMING,
                request.run_id,
                request.workflow,
                self.now,
                codecs.encode(attributes),
                keys,
                [index_value(attributes[key]) for key in keys],
                codecs.encode(stored),
                workflow_item_id(request.run_id),
                self.channel,
                claimed,
                [index_value(attributes[key]) for key in claimed],
                [codecs.encode(attributes[key]) for key in claimed],
                None if timer is None else work_item_id(request.run_id, timer),
                None if timer is None else timer.number,
                None if timer is None else timer.attempt,
                None if timer is None else timer.payload,
                None if timer is None else timer.available_at,
            )
        except asyncpg.exceptions.UniqueViolationError as exc:
            if is_run_id_taken(exc):
                raise requests.run_exists(request.run_id) from None
            raise
        except asyncpg.exceptions.PostgresError as exc:
            if exc.sqlstate == sql.PAIR_HELD:
                return False
            raise
        self.signals.add(WORK_TOPIC)
        return True

    async def cancel(self, run_id: str, reason: str | None) -> RunRecord | None:
        """Cancel run ``run_id`` unless it is closed; ``None`` if there is no such run."""
        found = await self.lock_run(run_id)
        if found is None:
            return None
        run, attributes = found
        event = cancel.cancel_now(run.status, reason)
        if event is not None:
            run, _ = self.stamp(run, event)
            await self.save_run(run, attributes)
        return run

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        found = await self.lock_run(run_id)
        if found is None:
            return None
        run, attributes = found
        plan = cancel.plan_cancel(run.status, run.workflow, reason, self.now, grace_seconds)
        if plan.event is None:
            return run
        run, _ = self.stamp(run, plan.event)
        if plan.timer is not None:
            dropped = await self.conn.fetch(sql.DROP_CANCELLED_WORK, run_id, self.now)
            for row in sorted(dropped, key=lambda row: (row["kind"], row["number"])):
                in_flight = bool(row["in_flight"])
                discard = cancel.discarded(row["kind"], row["number"], row["attempt"], in_flight)
                if discard is not None:
                    run, _ = self.stamp(run, discard)
            run, _ = await self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
            run, _ = await self.enqueue(run, plan.timer, "", 0.0)
        await self.save_run(run, attributes)
        return run

    async def claim_if_free(
        self,
        run_id: str,
        key: str,
        value: AttributeValue,
        step: int | None,
        attempt: int | None,
        ttl: float | None = None,
        release_on: str | None = None,
    ) -> int | None:
        """Claim a free pair and return its generation; ``None`` (pair locked) if held."""
        generation: int | None = await self.conn.fetchval(
            sql.CLAIM_IF_FREE,
            key,
            index_value(value),
            codecs.encode(value),
            run_id,
            step,
            attempt,
            ttl,
            release_on,
        )
        return generation

    async def try_claim(self, run_id: str, event: AttributeSet) -> EventKind:
        """The event a unique ``AttributeSet`` becomes: claimed, or a conflict."""
        reuse = (event.ttl, claims.encode_release_on(event.release_on))
        generation = await self.claim_if_free(
            run_id, event.key, event.value, event.step, event.attempt, *reuse
        )
        if generation is None:
            ivalue = index_value(event.value)
            row = await self.conn.fetchrow(sql.GET_CLAIM, event.key, ivalue)
            assert row is not None, "a pair claim_if_free found taken stays (its holder is locked)"
            decided = claims.on_attribute_set(codecs.held_from_row(row), run_id, event, self.now)
            if isinstance(decided, AttributeConflict):
                return decided
            generation = decided
            encoded = codecs.encode(event.value)
            params = (event.key, ivalue, encoded, run_id, generation, event.step, event.attempt)
            await self.conn.execute(sql.PUT_CLAIM, *params, *reuse)
        return msgspec.structs.replace(event, generation=generation)

    async def stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        """Append ``chunks`` to stream ``name`` of run ``run_id``, whose row this
        transaction has locked; the first chunk's offset."""
        first: int = await self.conn.fetchval(sql.NEXT_STREAM_SEQ, run_id, name)
        await self.conn.execute(sql.INSERT_STREAM, run_id, name, first, list(chunks), self.now)
        self.signals.add(run_topic(run_id))
        return first

    async def deliver(self, run_id: str, delivery: HookDelivery) -> HookStartResult:
        """Give ``delivery`` to run ``run_id`` (see ``worlds._rules.resume``)."""
        found = await self.lock_run(run_id)
        assert found is not None, f"run {run_id} was locked or created in this transaction"
        run, attributes = found
        token = delivery.token
        inserted = await self.conn.fetchval(
            sql.INSERT_HOOK, token, run_id, 0, codecs.encode({}), self.now
        )
        number = 0
        if inserted is None:
            hook = await self.conn.fetchrow(sql.HOOK_HOLDER, token)
            assert hook is not None, "hooks go only with their run, which is locked"
            if hook["run_id"] != run_id:
                return HookStartResult(run_id=run_id, hook_holder=hook["run_id"])
            number = hook["hook"]
        if delivery.resume_id is not None:
            recorded = await self.conn.fetchval(
                sql.RECORD_RESUME, token, delivery.resume_id, run_id
            )
            if recorded is None:  # a concurrent delivery with this resume id came first
                seen = await self.conn.fetchval(sql.RESUMED, token, delivery.resume_id)
                return HookStartResult(run_id=str(seen))
        run, _ = self.stamp(run, resume.received(number, delivery))
        run, _ = await self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
        await self.save_run(run, attributes)
        return HookStartResult(run_id=run_id)

    async def try_hook(self, run_id: str, event: HookCreated) -> EventKind:
        """The event a ``HookCreated`` becomes: the hook, or a conflict over its token."""
        while True:
            inserted = await self.conn.fetchval(
                sql.INSERT_HOOK,
                event.token,
                run_id,
                event.hook,
                codecs.encode(event.attributes),
                self.now,
            )
            if inserted is not None:
                return event
            attributes = codecs.encode(event.attributes)
            bind = (event.hook, attributes, event.token, run_id)
            if await self.conn.fetchval(sql.BIND_HOOK, *bind) is not None:
                return event
            holder = await self.conn.fetchrow(sql.HOOK_HOLDER, event.token)
            if holder is not None:
                return HookConflict(
                    hook=event.hook, token=event.token, holder_run_id=holder["run_id"]
                )

    async def continue_run(self, old: RunRecord, event: RunContinued) -> None:
        """Start ``event.next_run_id`` as ``old``'s successor and move ``old``'s claims."""
        try:
            await self.insert_run(event.next_run_id, old.workflow, event.args, old.attributes)
        except ValueError:
            raise requests.successor_exists(event.next_run_id) from None
        await self.conn.execute(sql.MOVE_RUN_CLAIMS, event.next_run_id, old.id)
        await self.drop_holds(old.id)
        await self.conn.execute(sql.MOVE_RUN_SLOTS, event.next_run_id, old.id)
        await self._move_hooks(old, event)

    async def _move_hooks(self, old: RunRecord, event: RunContinued) -> None:
        """Hand ``old``'s tokens, unbound, and their unread payloads to its successor."""
        held = [
            codecs.hook_from_row(row) for row in await self.conn.fetch(sql.LIST_RUN_HOOKS, old.id)
        ]
        if not held:
            return
        rows = await self.conn.fetch(sql.READ_HOOK_PAYLOADS, old.id)
        carried = carried_payloads([codecs.decode_event(row["data"]) for row in rows], held, event)
        if carried:
            found = await self.lock_run(event.next_run_id)
            assert found is not None
            run, attributes = found
            for received in carried:
                run, _ = self.stamp(run, received)
            await self.save_run(run, attributes)
        await self.conn.execute(sql.MOVE_RUN_HOOKS, event.next_run_id, old.id)
        await self.conn.execute(sql.MOVE_HOOK_RESUMES, event.next_run_id, old.id)

    async def enqueue(
        self, run: RunRecord, new: NewWorkItem, worker_id: str, seconds: float
    ) -> tuple[RunRecord, WorkItem | None]:
        """Add ``new`` to the queue (merging a workflow item); lease it when asked and due."""
        item_id = work_item_id(run.id, new)
        available = new.available_at or self.now
        lease_now = new.lease and available <= self.now
        token = new_token() if lease_now else 0
        expires = lease_deadline(self.now, seconds) if lease_now else None
        name = run.workflow if new.kind == "workflow" else new.name
        params = (
            item_id,
            run.id,
            new.kind,
            name,
            new.number,
            new.attempt,
            new.payload,
            available,
            worker_id if lease_now else None,
            token,
            expires,
            lease_now,
        )
        if new.kind != "workflow":
            await self.conn.execute(sql.REPLACE_WORK, *params)
        elif await self.conn.fetchval(sql.INSERT_WORK_IF_ABSENT, *params) is None:
            return run, await self._merge_workflow(
                run, item_id, available, new.lease, worker_id, seconds
            )
        if not lease_now:
            self.signals.add(WORK_TOPIC)
            return run, None
        assert expires is not None
        if new.kind == "step":
            run, _ = self.stamp(run, StepStarted(step=new.number, attempt=new.attempt))
        leased = WorkItem(
            id=item_id,
            run_id=run.id,
            kind=new.kind,
            name=name,
            number=new.number,
            attempt=new.attempt,
            payload=new.payload,
            token=token,
            lease_expires_at=expires,
        )
        return run, leased

    async def _merge_workflow(
        self,
        run: RunRecord,
        item_id: str,
        available: datetime,
        lease: bool,
        worker_id: str,
        seconds: float,
    ) -> WorkItem | None:
        row = await self.conn.fetchrow(sql.LOCK_WORK, item_id)
        assert row is not None, "the run's workflow item was there (its insert conflicted)"
        owner, expires_at = row["owner"], row["expires_at"]
        if owner is not None and expires_at is not None and expires_at > self.now:
            await self.conn.execute(sql.SET_REWAKE, item_id)
            return None
        available_at = min(row["available_at"], available)
        if lease and available_at <= self.now:
            token = new_token()
            expires = lease_deadline(self.now, seconds)
            await self.conn.execute(
                sql.LEASE_ONE, item_id, available_at, worker_id, token, expires, row["attempt"]
            )
            return WorkItem(
                id=item_id,
                run_id=run.id,
                kind="workflow",
                name=row["name"],
                number=row["number"],
                attempt=row["attempt"],
                payload=row["payload"],
                token=token,
                lease_expires_at=expires,
            )
        await self.conn.execute(sql.SET_AVAILABLE, item_id, available_at)
        self.signals.add(WORK_TOPIC)
        return None
