"""The SQLite world's transactions: running them, retrying locks, and the writer.

``Writer`` holds one write transaction's state (its clock, the events it
appends, the signals it raises), reads the rows a rule of ``worlds._rules``
needs and writes its outcome; ``transact`` runs a body in ``BEGIN IMMEDIATE``
and retries while another process holds the lock.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, TypeVar, assert_never, cast

import msgspec

from worlds._rules import (
    cancel,
    children,
    claims,
    commits,
    requests,
    resume,
    runs,
    slots,
    work,
)
from worlds.protocol import WORK_TOPIC, run_topic
from worlds.semantics import (
    carried_payloads,
    index_value,
    lease_deadline,
    work_item_id,
    workflow_item_id,
)
from worlds.sqlite import codecs
from worlds.sqlite import statements as sql
from worlds.types import (
    AttributeConflict,
    AttributeSet,
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

__all__ = [
    "RollbackError",
    "WouldBlockError",
    "Writer",
    "is_busy",
    "new_token",
    "retrying",
    "run_once",
    "transact",
]

T = TypeVar("T")

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_RETRIES = 8


class WouldBlockError(Exception):
    """An inline attempt met a lock; the operation must run where it may wait."""


class RollbackError(Exception):
    """Raised inside a transaction to undo it and return ``result`` instead."""

    def __init__(self, result: object) -> None:
        super().__init__()
        self.result = result


def is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(exc) or "busy" in str(exc)


def retrying(operation: Callable[[], T]) -> T:
    """Run ``operation``, again after a short pause while the database stays locked."""
    delay = 0.002
    for _ in range(_RETRIES - 1):
        try:
            return operation()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
    return operation()


def run_once(operation: Callable[[], T], blocking: bool) -> T:
    """Run ``operation``; blocking, retry while locked, else give up at once."""
    if blocking:
        return retrying(operation)
    try:
        return operation()
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            raise WouldBlockError from exc
        raise


def transact(
    db: sqlite3.Connection, body: Callable[[sqlite3.Connection], T], *, blocking: bool
) -> T:
    """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any exception."""

    def one_try() -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            result = body(db)
            db.execute("COMMIT")
        except RollbackError as rollback:
            db.execute("ROLLBACK")
            return cast(T, rollback.result)
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return result

    return run_once(one_try, blocking)


def new_token() -> int:
    return secrets.randbits(62) + 1


class Writer:
    """The state of one write transaction: its clock, appended events and signals."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.now = utcnow()
        self.now_us = codecs.to_micros(self.now)
        self.signals: set[str] = set()
        self.rows: list[tuple[str, int, str, bytes]] = []
        self.closing: dict[str, EventKind] = {}

    def stamp(self, run: RunRecord, event: EventKind) -> tuple[RunRecord, EventKind]:
        """Number and date ``event`` as the next of ``run``; queue its row."""
        run, stored = runs.stamped(run, event, self.now)
        self.queue(run.id, stored)
        return run, stored

    def queue(self, run_id: str, stored: EventKind) -> None:
        """Queue the row of ``stored``, an event of run ``run_id`` already numbered."""
        self.rows.append(
            (run_id, stored.seq, codecs.EVENT_TAGS[type(stored)], codecs.encode(stored))
        )
        if isinstance(stored, runs.CLOSING_EVENTS):
            self.closing[run_id] = stored

    def commit(
        self, flow: Generator[commits.Need, Any, commits.Committed], request: CommitRequest
    ) -> commits.Committed:
        """Drive ``commits.commit_flow`` in this transaction: do each step it asks for."""
        return commits.drive(flow, lambda need: self._do(need, request))

    def _do(self, need: commits.Need, request: CommitRequest) -> object:
        """Do one step a commit asks for; the reply the commit flow gets."""
        match need:
            case commits.Settle(run_id=run_id, event=settling):
                if isinstance(settling, AttributeSet):
                    return self.try_claim(run_id, settling)
                return self.try_hook(run_id, settling)
            case commits.Acquire(run_id=run_id, event=requested):
                return self.acquire(run_id, requested)
            case commits.Append(run=run, event=event):
                self.queue(run.id, event)
            case commits.Release(run_id=run_id, hold=hold):
                self.release_hold(run_id, hold)
            case commits.Continue(run=run, event=continued):
                self.continue_run(run, continued)
            case commits.Stream(run_id=run_id, event=written):
                self.stream(run_id, written.name, [written.data])
            case commits.Ack(action=action):
                assert request.lease is not None
                key = (request.run_id, request.lease.id)
                if action == "rewake":
                    self.db.execute(sql.REWAKE_ON_ACK, (self.now_us, *key))
                    self.signals.add(WORK_TOPIC)
                else:
                    self.db.execute(sql.DELETE_WORK, key)
            case commits.Enqueue(run=run, new=new):
                return self.enqueue(run, new, request.worker_id, request.lease_seconds)
            case _:
                assert_never(need)
        return None

    def stamp_new(self, run_id: str, last_seq: int, events: list[StepStarted]) -> None:
        """Queue ``events`` as the ones after ``last_seq`` of a run not otherwise loaded."""
        for seq, event in enumerate(events, last_seq + 1):
            stored = msgspec.structs.replace(event, seq=seq, at=self.now)
            self.rows.append((run_id, seq, "step_started", codecs.encode(stored)))

    def flush_events(self) -> None:
        if self.rows:
            self.db.executemany(sql.INSERT_EVENT, self.rows)
            self.rows = []

    def save_run(self, run: RunRecord, attributes: bytes | None) -> None:
        """Store ``run``'s queued events and state; ``attributes`` None: unchanged."""
        self.flush_events()
        if attributes is None:
            self.db.execute(sql.UPDATE_RUN_STATE, codecs.run_state_params(run))
        else:
            self.db.execute(sql.UPDATE_RUN, codecs.run_update_params(run, attributes))
        if run.status.is_closed:
            self.db.execute(sql.DROP_RUN_WORK, (run.id,))
            self.db.execute(sql.DISPOSE_HOOKS, (run.id,))
            self.release_slots(run.id)
            if run.status != RunStatus.CONTINUED:  # its claims moved to the next run
                self.close_claims(run)
            self.signals.add(run_topic(run.id))
            closing = self.closing.pop(run.id, None)
            if closing is not None:
                self._after_close(run, closing)

    def _after_close(self, run: RunRecord, closing: EventKind) -> None:
        """Tell the parent its child closed; cancel the children that close with it."""
        notice = children.closed_notice(run, closing)
        if notice is not None:
            row = self.db.execute(sql.GET_RUN, (notice.parent_run_id,)).fetchone()
            parent = None if row is None else codecs.run_from_row(row)
            if parent is not None and children.accepts_notice(parent):
                parent, _ = self.stamp(parent, notice.event)
                parent, _ = self.enqueue(parent, NewWorkItem(kind="workflow"), "", 0.0)
                self.save_run(parent, row["attributes"])
        if children.cascades(run):
            reason = children.cascade_reason(run)
            found = self.db.execute(sql.OPEN_CHILDREN, (children.PARENT_KEY, index_value(run.id)))
            for child_row in found.fetchall():
                child = codecs.run_from_row(child_row)
                if children.cancels_with_parent(child, run.id):
                    child, _ = self.stamp(child, RunCancelled(reason=reason))
                    self.save_run(child, child_row["attributes"])

    def close_claims(self, run: RunRecord) -> None:
        """Apply the reuse window of each claim ``run`` held, now that it closed."""
        assert run.closed_at is not None
        for row in self.db.execute(sql.WINDOWED_CLAIMS, (run.id,)).fetchall():
            release_on = claims.decode_release_on(row["release_on"])
            fate = claims.on_close(run.status, run.closed_at, row["ttl"], release_on)
            pair = (row["key"], row["ivalue"])
            if fate == "release":
                self.db.execute(sql.RELEASE_CLAIM, pair)
            elif fate is not None:
                self.db.execute(sql.SET_LAPSES_AT, (codecs.to_micros(fate), *pair))

    def debounce(self, request: CreateRunRequest) -> CreateRunResult | claims.Takeover | None:
        """A debounced start meets its pair: the pending holder updated (the result),
        a takeover for the new run, or ``None`` (the pair is free)."""
        debounce = request.debounce
        assert debounce is not None
        pair = (debounce.key, index_value(request.attributes[debounce.key]))
        row = self.db.execute(sql.GET_CLAIM, pair).fetchone()
        held = None if row is None else codecs.held_from_row(row)
        if held is None or claims.is_free(held, self.now):
            return None
        record, item = None, None
        if held.pruned_status is None:
            record = codecs.run_from_row(self.db.execute(sql.GET_RUN, (held.run_id,)).fetchone())
            key = (record.id, workflow_item_id(record.id))
            item = self.db.execute(sql.WORKFLOW_ITEM_LEASED, key).fetchone()
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
        self.db.execute(sql.REWRITE_CREATED, (codecs.encode(created), record.id))
        if item is not None:
            due = codecs.to_micros(decided.start_at)
            self.db.execute(sql.SET_AVAILABLE, (due, record.id, workflow_item_id(record.id)))
            self.signals.add(WORK_TOPIC)
        return CreateRunResult(run=record, debounced=True)

    def admit(self, request: CreateRunRequest) -> tuple[str | ClaimConflict, dict[str, int]]:
        """``slots.admit`` for a new run, and the position it takes at each pair."""
        states, positions = {}, {}
        for key in request.limits:
            pair = (key, index_value(request.attributes[key]))
            row = self.db.execute(sql.SLOT_STATE, pair).fetchone()
            waiting = 0 if row["first_waiter"] is None else 1
            someone = row["holder"] or row["first_waiter"]
            states[key] = slots.PairState(row["holding"], waiting, someone)
            positions[key] = row["next_position"]
        return slots.admit(request, states), positions

    def take_slots(
        self, request: CreateRunRequest, positions: dict[str, int], holding: bool
    ) -> None:
        """The new run's row at each of its limited pairs: a slot, or a place in line."""
        self.db.executemany(
            sql.INSERT_SLOT,
            [
                (
                    key,
                    index_value(request.attributes[key]),
                    positions[key],
                    request.run_id,
                    codecs.encode(request.attributes[key]),
                    limit.limit,
                    int(holding),
                    0,
                )
                for key, limit in request.limits.items()
            ],
        )

    def release_slots(self, run_id: str) -> None:
        """Drop a closed run's slots and places in line; promote whom that admits."""
        self._promote([tuple(row) for row in self.db.execute(sql.DROP_RUN_SLOTS, (run_id,))])

    def _promote(self, freed: list[tuple[str, str]]) -> None:
        """Promote whom the ``freed`` pairs now admit (``slots.promote_flow``)."""
        if freed:
            slots.drive(slots.promote_flow(freed), self._promotion_step)

    def acquire(self, run_id: str, event: SlotRequested) -> SlotRequested:
        """A ``hold``'s row at its pair: the slot if ``slots.admit_hold`` says so, else in line."""
        pair = (event.key, index_value(event.value))
        row = self.db.execute(sql.SLOT_STATE, pair).fetchone()
        state = slots.PairState(row["holding"], int(row["first_waiter"] is not None), None)
        acquired = slots.admit_hold(state, event.limit)
        params = (*pair, row["next_position"], run_id, codecs.encode(event.value))
        self.db.execute(sql.INSERT_SLOT, (*params, event.limit, int(acquired), event.hold))
        return msgspec.structs.replace(event, acquired=acquired)

    def release_hold(self, run_id: str, hold: int) -> None:
        """Drop hold ``hold`` of ``run_id`` (slot or place in line); promote whom that admits."""
        self._promote([tuple(row) for row in self.db.execute(sql.DROP_HOLD, (run_id, hold))])

    def _promotion_step(self, need: slots.Need) -> object:
        db = self.db
        match need:
            case slots.Head(pair=pair):
                row = db.execute(sql.FIRST_WAITER, pair).fetchone()
                return None if row is None else (row["run_id"], row["hold"])
            case slots.Views(run_id=run_id, hold=hold):
                views = []
                for row in db.execute(sql.RUN_WAITING, (run_id, hold)).fetchall():
                    pair = (row["key"], row["ivalue"])
                    (holding,) = db.execute(sql.COUNT_HOLDING, pair).fetchone()
                    first = tuple(db.execute(sql.FIRST_WAITER, pair).fetchone())
                    views.append(slots.PairView(pair, row["lim"], holding, first))
                return views
            case slots.Promote(run_id=run_id, hold=hold) if hold:
                db.execute(sql.PROMOTE_SLOTS, (run_id, hold))
                row = db.execute(sql.GET_RUN, (run_id,)).fetchone()
                run, _ = self.stamp(codecs.run_from_row(row), SlotAcquired(hold=hold))
                run, _ = self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
                self.save_run(run, row["attributes"])
                return None
            case slots.Promote(run_id=run_id, hold=hold):
                db.execute(sql.PROMOTE_SLOTS, (run_id, hold))
                (workflow,) = db.execute(sql.GET_WORKFLOW_NAME, (run_id,)).fetchone()
                item = (run_id, workflow_item_id(run_id), "workflow", workflow, 0, 1)
                db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, b"", self.now_us, None, 0, None, 0))
                self.signals.add(WORK_TOPIC)
                return None
            case _:
                assert_never(need)

    def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        row = self.db.execute(sql.GET_RUN, (run_id,)).fetchone()
        if row is None:
            return None
        run = codecs.run_from_row(row)
        plan = cancel.plan_cancel(run.status, run.workflow, reason, self.now, grace_seconds)
        if plan.event is None:
            return run
        run, _ = self.stamp(run, plan.event)
        if plan.timer is not None:
            dropped = self.db.execute(sql.DROP_CANCELLED_WORK, (run_id, self.now_us)).fetchall()
            for item in sorted(dropped, key=tuple):
                discard = cancel.discarded(
                    item["kind"], item["number"], item["attempt"], bool(item["in_flight"])
                )
                if discard is not None:
                    run, _ = self.stamp(run, discard)
            run, _ = self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
            run, _ = self.enqueue(run, plan.timer, "", 0.0)
        self.save_run(run, None)
        return run

    def stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        """Append ``chunks`` to stream ``name`` of open run ``run_id``; the first offset."""
        (first,) = self.db.execute(sql.NEXT_STREAM_SEQ, (run_id, name)).fetchone()
        self.db.executemany(
            sql.INSERT_STREAM,
            [(run_id, name, first + n, data, self.now_us) for n, data in enumerate(chunks)],
        )
        self.signals.add(run_topic(run_id))
        return int(first)

    def deliver(self, run_id: str, delivery: HookDelivery) -> HookStartResult:
        """Give ``delivery`` to run ``run_id`` (see ``worlds._rules.resume``)."""
        hook = self.db.execute(sql.GET_HOOK, (delivery.token,)).fetchone()
        if hook is None:
            self.db.execute(
                sql.INSERT_HOOK, (delivery.token, run_id, 0, codecs.encode({}), self.now_us)
            )
            number = 0
        elif hook["run_id"] != run_id:
            return HookStartResult(run_id=run_id, hook_holder=hook["run_id"])
        else:
            number = hook["hook"]
        if delivery.resume_id is not None:
            self.db.execute(sql.INSERT_RESUME, (delivery.token, delivery.resume_id, run_id))
        row = self.db.execute(sql.GET_RUN, (run_id,)).fetchone()
        run, _ = self.stamp(codecs.run_from_row(row), resume.received(number, delivery))
        run, _ = self.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
        self.save_run(run, row["attributes"])
        return HookStartResult(run_id=run_id)

    def try_hook(self, run_id: str, event: HookCreated) -> EventKind:
        """The event a ``HookCreated`` becomes: the token claimed, or a conflict."""
        hook_row = (run_id, event.hook, codecs.encode(event.attributes), self.now_us)
        if self.db.execute(sql.INSERT_HOOK, (event.token, *hook_row)).rowcount:
            return event
        bind = (event.hook, codecs.encode(event.attributes), event.token, run_id)
        if self.db.execute(sql.BIND_HOOK, bind).rowcount:
            return event
        holder = self.db.execute(sql.GET_HOOK, (event.token,)).fetchone()
        return HookConflict(hook=event.hook, token=event.token, holder_run_id=holder["run_id"])

    def cancel(self, run_id: str, reason: str | None) -> RunRecord | None:
        """Cancel run ``run_id`` unless it is closed; ``None`` if there is no such run."""
        row = self.db.execute(sql.GET_RUN, (run_id,)).fetchone()
        if row is None:
            return None
        run = codecs.run_from_row(row)
        event = cancel.cancel_now(run.status, reason)
        if event is not None:
            run, _ = self.stamp(run, event)
            self.save_run(run, None)
        return run

    def continue_run(self, old: RunRecord, event: RunContinued) -> None:
        """Start ``event.next_run_id`` as ``old``'s successor and move ``old``'s claims."""
        db, run_id = self.db, event.next_run_id
        try:
            db.execute(
                sql.INSERT_RUN, (run_id, old.workflow, self.now_us, codecs.encode(old.attributes))
            )
        except sqlite3.IntegrityError:
            raise requests.successor_exists(run_id) from None
        db.executemany(
            sql.UPSERT_ATTRIBUTE,
            [(run_id, key, index_value(value)) for key, value in old.attributes.items()],
        )
        stored = runs.created_event(old.workflow, event.args, old.attributes, self.now)
        self.rows.append((run_id, 1, "run_created", codecs.encode(stored)))
        db.execute(sql.MOVE_RUN_CLAIMS, (run_id, old.id))
        self._promote([tuple(row) for row in db.execute(sql.DROP_HOLDS, (old.id,))])
        db.execute(sql.MOVE_RUN_SLOTS, (run_id, old.id))
        self._move_hooks(old, event)
        item = (run_id, workflow_item_id(run_id), "workflow", old.workflow, 0, 1)
        db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, b"", self.now_us, None, 0, None, 0))
        self.signals.add(WORK_TOPIC)

    def _move_hooks(self, old: RunRecord, event: RunContinued) -> None:
        """Hand ``old``'s tokens, unbound, and their unread payloads to its successor."""
        db, run_id = self.db, event.next_run_id
        rows = db.execute(sql.LIST_RUN_HOOKS, (old.id,)).fetchall()
        if not rows:
            return
        held = [codecs.hook_from_row(row) for row in rows]
        logged = [
            codecs.decode_event(row["data"])
            for row in db.execute(sql.READ_HOOK_PAYLOADS, (old.id,))
        ]
        carried = carried_payloads(logged, held, event)
        for seq, received in enumerate(carried, 2):
            stored = msgspec.structs.replace(received, seq=seq, at=self.now)
            self.rows.append((run_id, seq, "hook_received", codecs.encode(stored)))
        if carried:
            db.execute(sql.BUMP_LAST_SEQ, (len(carried), run_id)).fetchone()
        db.execute(sql.MOVE_RUN_HOOKS, (run_id, old.id))
        db.execute(sql.MOVE_HOOK_RESUMES, (run_id, old.id))

    def try_claim(self, run_id: str, event: AttributeSet) -> EventKind:
        """The event a unique ``AttributeSet`` becomes: claimed, or a conflict."""
        ivalue = index_value(event.value)
        row = self.db.execute(sql.GET_CLAIM, (event.key, ivalue)).fetchone()
        held = None if row is None else codecs.held_from_row(row)
        generation = claims.on_attribute_set(held, run_id, event, self.now)
        if isinstance(generation, AttributeConflict):
            return generation
        self.db.execute(
            sql.PUT_CLAIM,
            (
                event.key,
                ivalue,
                codecs.encode(event.value),
                run_id,
                generation,
                event.step,
                event.attempt,
                event.ttl,
                claims.encode_release_on(event.release_on),
            ),
        )
        return msgspec.structs.replace(event, generation=generation)

    def enqueue(
        self, run: RunRecord, new: NewWorkItem, worker_id: str, seconds: float
    ) -> tuple[RunRecord, WorkItem | None]:
        """Add ``new`` to the queue (merging a workflow item); lease it when asked and due."""
        placed = work.place(
            run,
            work_item_id(run.id, new),
            new,
            now=self.now,
            worker_id=worker_id,
            lease_seconds=seconds,
            new_token=new_token,
        )
        params = codecs.work_params(run.id, new, placed)
        if new.kind != "workflow":
            self.db.execute(sql.REPLACE_WORK, params)
        elif self.db.execute(sql.INSERT_WORK_IF_ABSENT, params).rowcount == 0:
            available = codecs.to_micros(placed.available_at)
            merged = self._merge_workflow(
                run.id, placed.item_id, available, new.lease, worker_id, seconds
            )
            return run, merged
        if placed.leased is None:
            self.signals.add(WORK_TOPIC)
        elif placed.started is not None:
            run, _ = self.stamp(run, placed.started)
        return run, placed.leased

    def _merge_workflow(
        self, run_id: str, item_id: str, available: int, lease: bool, worker_id: str, seconds: float
    ) -> WorkItem | None:
        key = (run_id, item_id)
        row = self.db.execute(sql.GET_WORK, key).fetchone()
        owner, expires_at = row["owner"], row["expires_at"]
        if owner is not None and expires_at is not None and expires_at > self.now_us:
            self.db.execute(sql.SET_REWAKE, key)
            return None
        available_at = min(row["available_at"], available)
        if lease and available_at <= self.now_us:
            token = new_token()
            expires = codecs.to_micros(lease_deadline(self.now, seconds))
            attempt = row["attempt"]
            self.db.execute(
                sql.LEASE_WORK, (available_at, worker_id, token, expires, attempt, *key)
            )
            return codecs.leased(row, attempt=attempt, token=token, expires=expires)
        self.db.execute(sql.SET_AVAILABLE, (available_at, *key))
        self.signals.add(WORK_TOPIC)
        return None
