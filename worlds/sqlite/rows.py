"""The SQLite world's rows port: ``worlds._flows.rows.Rows`` over one write transaction.

``SqliteRows`` is one write transaction's state (its clock, the event rows it
queued, the topics to signal once it commits) and every row operation the
flows ask for, each a statement or a few of ``worlds.sqlite.statements``. The
methods are ``async`` for the port's sake but never suspend: they run their
statements on the connection and return, so a flow over them runs to the end
in one step (``worlds._flows.stepper.run_sync``) inside the transaction that
``worlds.sqlite.connection`` holds. The one writer holds SQLite's write lock,
so no method needs a lock of its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from worlds import _columns as columns
from worlds import types
from worlds._columns import claim_params, encode, key_candidate, key_row, worker_params
from worlds._flows import rows as port
from worlds.protocol import WORK_TOPIC, work_topic
from worlds.semantics import (
    decode_release_on,
    index_value,
    workflow_item_id,
)
from worlds.sqlite import codecs
from worlds.sqlite import statements as sql
from worlds.sqlite.transactions import WouldBlockError, new_token

__all__ = ["Executes", "SqliteRows"]

_EventRow = tuple[str, int, str, bytes]


class _Savepoint(NamedTuple):
    """What a savepoint restores beside the rows: the signals and queued events then."""

    signals: frozenset[str]
    events: tuple[_EventRow, ...]


def _holdings(row: sqlite3.Row) -> tuple[bool, bool, bool]:
    """A run's holdings as ``statements.RUN_HOLDINGS`` names them: slots, windowed
    claims, hook tokens."""
    return bool(row["has_slots"]), bool(row["has_windowed"]), bool(row["has_hooks"])


class Executes(Protocol):
    """What runs statements: an ``sqlite3.Connection``, or a write transaction's ``db``."""

    def execute(self, statement: str, params: Any = ..., /) -> sqlite3.Cursor: ...

    def executemany(self, statement: str, params: Iterable[Any], /) -> sqlite3.Cursor: ...


class _HeldRun(NamedTuple):
    """A new run whose row ``insert_run`` held back (``saved_next``): its pending state."""

    workflow: str
    created_us: int
    attributes: bytes
    admitted_us: int | None


class _Writer:
    """The connection as one write transaction's rows use it, with two row writes
    held back until a statement could see the difference.

    New runs that ``insert_run`` held back are written, pending, before any
    statement that names the ``runs`` table (so every read and update sees
    them) and before the transaction ends; ``save_run`` writes one in its saved
    state instead, so a run created with its first task costs one row write.
    Work items ``delete_item`` deleted are deleted before any statement that
    names the ``work`` table and before the transaction ends; ``put_work`` of
    the same run turns one into the new item instead (a step's item becomes its
    successor's: one row write per step, not a delete and an insert).
    """

    __slots__ = ("deleted", "held", "raw")

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self.held: dict[str, _HeldRun] = {}
        self.deleted: list[tuple[str, str]] = []
        """(run id, item id) of each work item deleted but not yet written."""

    def execute(self, statement: str, params: Any = (), /) -> sqlite3.Cursor:
        if self.held or self.deleted:
            self.write_seen_by(statement)
        return self.raw.execute(statement, params)

    def executemany(self, statement: str, params: Iterable[Any], /) -> sqlite3.Cursor:
        if self.held or self.deleted:
            self.write_seen_by(statement)
        return self.raw.executemany(statement, params)

    def write_seen_by(self, statement: str) -> None:
        """Write what ``statement`` would see held back."""
        if self.held and sql.names_table(statement, "runs"):
            self.write_held()
        if self.deleted and sql.names_table(statement, "work"):
            self.write_deleted()

    def write_all(self) -> None:
        """Write everything held back (before a savepoint, before the commit)."""
        self.write_held()
        self.write_deleted()

    def forget(self) -> None:
        """Drop what is held back (its savepoint was rolled back)."""
        self.held.clear()
        self.deleted.clear()

    def write_deleted(self) -> None:
        """Delete the work items held back as deleted."""
        deleted, self.deleted = self.deleted, []
        for key in deleted:
            self.raw.execute(sql.DELETE_WORK, key)

    def put_work(self, params: tuple[object, ...]) -> None:
        """Store a work item (``codecs.work_params``): in the row of an item of its run
        deleted in this transaction when there is one, else inserted or replaced."""
        run_id, key = params[0], (params[0], params[1])
        if key in self.deleted:  # the same item put back: replacing it is the one write
            self.deleted.remove(key)
            self.raw.execute(sql.REPLACE_WORK, params)
            return
        for n, (deleted_run, deleted_item) in enumerate(self.deleted):
            if deleted_run != run_id:
                continue
            del self.deleted[n]
            try:
                reused = self.raw.execute(sql.REUSE_WORK, (*params[1:], run_id, deleted_item))
            except sqlite3.IntegrityError:  # the new item's id is taken by another item
                self.raw.execute(sql.DELETE_WORK, (run_id, deleted_item))
                break
            if reused.rowcount:
                return
            break  # the deleted item was not there: nothing to reuse
        self.raw.execute(sql.REPLACE_WORK, params)

    def write_held(self) -> None:
        """Write every held-back run as it was created (pending). Raises ``IdTaken``."""
        held, self.held = self.held, {}
        for run_id, run in held.items():
            try:
                self.raw.execute(
                    sql.INSERT_RUN,
                    (run_id, run.workflow, run.created_us, run.attributes, run.admitted_us),
                )
            except sqlite3.IntegrityError:
                raise port.IdTaken(run_id) from None

    def write_saved(self, run: types.RunRecord, attributes: bytes | None) -> None:
        """Write held-back ``run`` in its saved state (``attributes`` encoded, or None
        for those it was created with). Raises ``IdTaken``."""
        held = self.held.pop(run.id)
        params = (run.id, run.workflow, run.status.value, held.created_us)
        state = codecs.run_update_params(run, held.attributes if attributes is None else attributes)
        try:  # UPDATE_RUN's values but the status (taken above) and the id (last)
            self.raw.execute(sql.INSERT_SAVED_RUN, (*params, *state[1:7], held.admitted_us))
        except sqlite3.IntegrityError:
            raise port.IdTaken(run.id) from None


class SqliteRows:
    """The rows of one SQLite write transaction (``BEGIN IMMEDIATE`` already taken)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = _Writer(db)
        self.now = types.utcnow()
        self._stamp = (self.now, codecs.to_micros(self.now))
        self.signals: set[str] = set()
        """The topics to signal once the transaction committed."""
        self._events: list[_EventRow] = []
        self._attributes: dict[str, dict[str, types.AttributeValue]] = {}
        """By run: the attributes it was read or created with (saved only if they change)."""
        self._later: tuple[str, int, list[bytes]] | None = None
        """A run's events after a seq as ``commit_target`` read them (run id, seq, their
        data), for the ``events`` call that follows it; dropped when an event is queued."""
        self._holdings: dict[str, tuple[bool, bool, bool]] = {}
        """By run: whether it has slots, windowed claims and hook tokens, as last read in
        this transaction (by ``commit_target`` or ``drop_run_slots``), so closing it
        costs no statement for what it lacks; forgotten whenever one may appear (a
        slot, claim or hook written or moved). One that goes away only makes a
        later delete find nothing."""

    @property
    def now_us(self) -> int:
        """``now`` in the microseconds the rows store."""
        moment, micros = self._stamp
        if moment is not self.now:  # a flow moved the clock (a first task's time)
            self._stamp = moment, micros = self.now, codecs.to_micros(self.now)
        return micros

    # ------------------------------------------------------------ the transaction

    def signal(self, topic: str) -> None:
        self.signals.add(topic)

    def new_token(self) -> int:
        return new_token()

    async def savepoint(self) -> object:
        self.db.write_all()  # what the savepoint undoes is then only what follows it
        self.db.execute("SAVEPOINT request")
        return _Savepoint(frozenset(self.signals), tuple(self._events))

    async def rollback_to(self, savepoint: object) -> None:
        self.db.execute("ROLLBACK TO request")
        self.db.execute("RELEASE request")
        self.db.forget()
        self._later = None
        self._holdings.clear()
        assert isinstance(savepoint, _Savepoint)
        self.signals, self._events = set(savepoint.signals), list(savepoint.events)

    async def release(self, savepoint: object) -> None:
        self.db.execute("RELEASE request")

    def fails_transaction(self, exc: Exception) -> bool:
        return isinstance(exc, WouldBlockError)

    def flush_events(self) -> None:
        """Write the queued event rows: one statement for a transaction's batch.

        Held-back runs go first: a taken run id is refused by its run row (``IdTaken``),
        not by its events'."""
        events = self._events
        if not events:
            return
        self.db.write_held()
        self._events = []
        for start in range(0, len(events), sql.EVENTS_PER_INSERT):
            chunk = events[start : start + sql.EVENTS_PER_INSERT]
            self.db.execute(sql.insert_events(len(chunk)), [v for row in chunk for v in row])

    def finish(self) -> None:
        """Write what the transaction still holds back (queued events, held-back runs),
        before it commits."""
        self.flush_events()
        self.db.write_all()

    def queue_started(self, run_id: str, last_seq: int, events: list[types.StepStarted]) -> None:
        """Queue ``events`` as the ones after ``last_seq`` of a run not otherwise loaded
        (``lease``, which bumped the run's ``last_seq`` itself)."""
        self._later = None
        for seq, event in enumerate(events, last_seq + 1):
            stored = types.StepStarted(step=event.step, attempt=event.attempt, seq=seq, at=self.now)
            self._events.append((run_id, seq, "step_started", codecs.encode(stored)))

    def _run(self, row: sqlite3.Row) -> types.RunRecord:
        run = codecs.columns.run(row)
        self._attributes[run.id] = run.attributes
        return run

    # ------------------------------------------------------------ runs and logs

    async def get_run(self, run_id: str, *, lock: bool = True) -> types.RunRecord | None:
        row = self.db.execute(sql.GET_RUN, (run_id,)).fetchone()
        return None if row is None else self._run(row)

    async def commit_target(
        self,
        run_id: str,
        lease: types.WorkItem | None,
        worker_id: str,
        *,
        closing: bool = False,
        events_after: int | None = None,
    ) -> tuple[types.RunRecord, port.HeldLease | None] | None:
        key = (None, None, None) if lease is None else (lease.id, worker_id, lease.token)
        later = events_after is not None
        if later:
            self.flush_events()  # the read must see this transaction's queued events too
        statement = sql.run_for_commit(closing=closing, later=later)
        params = (run_id, *key, events_after) if later else (run_id, *key)
        found = self.db.execute(statement, params).fetchall()
        if not found:
            return None
        row = found[0]
        held = None if row["kind"] is None else port.HeldLease(row["kind"], bool(row["rewake"]))
        if closing:
            self._holdings[run_id] = _holdings(row)
        if events_after is not None:
            data = [r["later"] for r in found if r["later"] is not None]
            self._later = (run_id, events_after, data)
        return self._run(row), held

    async def insert_run(
        self,
        run: types.RunRecord,
        created: types.RunCreated,
        *,
        wake_at: datetime | None,
        saved_next: bool = False,
    ) -> None:
        attributes = run.attributes
        admitted = None if run.admitted_at is None else codecs.to_micros(run.admitted_at)
        held = _HeldRun(run.workflow, self.now_us, codecs.encode(attributes), admitted)
        self.db.held[run.id] = held
        if not saved_next:
            self.db.write_held()
        if attributes:
            terms = [(run.id, key, index_value(value)) for key, value in attributes.items()]
            self.db.executemany(sql.UPSERT_ATTRIBUTE, terms)
        self._later = None
        # queued: it goes in with the run's next events (its first task's), in one statement
        self._events.append((run.id, 1, "run_created", codecs.encode(created)))
        self._attributes[run.id] = attributes
        if wake_at is not None:
            item = (run.id, workflow_item_id(run.id), "workflow", run.workflow, 0, 1, b"")
            due = codecs.to_micros(wake_at)
            self.db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, due, None, 0, None, 0))
            self.signals.add(work_topic(run.workflow))

    def append(self, run_id: str, event: types.EventKind) -> None:
        self._later = None
        tag = codecs.EVENT_TAGS[type(event)]
        self._events.append((run_id, event.seq, tag, codecs.encode(event)))

    async def save_run(self, run: types.RunRecord) -> None:
        if run.id in self.db.held:  # created in this transaction: one row write
            unchanged = run.attributes is self._attributes.get(run.id)
            self.db.write_saved(run, None if unchanged else codecs.encode(run.attributes))
            self._attributes[run.id] = run.attributes
            self.flush_events()
        elif run.attributes is self._attributes.get(run.id):
            self.flush_events()
            self.db.execute(sql.UPDATE_RUN_STATE, codecs.run_state_params(run))
        else:
            self.flush_events()
            attributes = codecs.encode(run.attributes)
            self.db.execute(sql.UPDATE_RUN, codecs.run_update_params(run, attributes))
            self._attributes[run.id] = run.attributes
        if run.status.is_closed:
            self.db.execute(sql.DROP_RUN_WORK, (run.id,))
            # ``get``: ``drop_run_slots`` comes next (``closing.save``) and reads them too
            _, _, hooks = self._holdings.get(run.id, (True, True, True))
            if hooks:
                self.db.execute(sql.DISPOSE_HOOKS, (run.id,))

    async def index_attributes(
        self, run_id: str, attributes: Mapping[str, types.AttributeValue]
    ) -> None:
        terms = [(run_id, key, index_value(value)) for key, value in attributes.items()]
        self.db.executemany(sql.UPSERT_ATTRIBUTE, terms)

    async def drop_attribute(self, run_id: str, key: str) -> None:
        self.db.execute(sql.DROP_ATTRIBUTE, (run_id, key))

    async def events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        later, self._later = self._later, None
        if later is not None and later[:2] == (run_id, after_seq):
            return [codecs.decode_event(data) for data in later[2]]
        self.flush_events()
        rows = self.db.execute(sql.READ_EVENTS, (run_id, after_seq)).fetchall()
        return [codecs.decode_event(row["data"]) for row in rows]

    async def hook_payloads(self, run_id: str) -> list[types.EventKind]:
        self.flush_events()
        rows = self.db.execute(sql.READ_HOOK_PAYLOADS, (run_id,)).fetchall()
        return [codecs.decode_event(row["data"]) for row in rows]

    async def rewrite_created(self, run_id: str, created: types.RunCreated) -> None:
        self._later = None
        self.flush_events()
        self.db.execute(sql.REWRITE_CREATED, (codecs.encode(created), run_id))

    async def set_admitted(self, run_id: str, at: datetime) -> None:
        self.db.execute(sql.SET_ADMITTED, (codecs.to_micros(at), run_id))

    async def open_runs_with(self, key: str, value: types.AttributeValue) -> list[types.RunRecord]:
        rows = self.db.execute(sql.OPEN_CHILDREN, (key, index_value(value))).fetchall()
        return [self._run(row) for row in rows]

    # ------------------------------------------------------------ claims

    async def get_claim(self, pair: port.Pair, *, lock: bool = False) -> port.HeldClaim | None:
        row = self.db.execute(sql.GET_CLAIM, pair).fetchone()
        return None if row is None else codecs.columns.held(row)

    async def claim_if_free(self, claim: port.ClaimRow) -> int | None:
        self._holdings.clear()
        claimed = self.db.execute(sql.CLAIM_IF_FREE, claim_params(claim)).fetchall()
        return int(claimed[0][0]) if claimed else None

    async def put_claim(self, claim: port.ClaimRow, generation: int) -> None:
        self._holdings.clear()
        self.db.execute(sql.PUT_CLAIM, claim_params(claim, generation))

    async def windowed_claims(self, run_id: str) -> list[port.Windowed]:
        if not self._holdings.get(run_id, (True, True, True))[1]:
            return []
        rows = self.db.execute(sql.WINDOWED_CLAIMS, (run_id,)).fetchall()
        return [
            port.Windowed(
                (row["key"], row["ivalue"]), row["ttl"], decode_release_on(row["release_on"])
            )
            for row in rows
        ]

    async def release_claim(self, pair: port.Pair) -> None:
        self.db.execute(sql.RELEASE_CLAIM, pair)

    async def lapse_claim(self, pair: port.Pair, at: datetime) -> None:
        self._holdings.clear()
        self.db.execute(sql.SET_LAPSES_AT, (codecs.to_micros(at), *pair))

    async def carry_claims(self, old_run_id: str, new_run_id: str) -> None:
        self._holdings.clear()
        self.db.execute(sql.MOVE_RUN_CLAIMS, (new_run_id, old_run_id))

    # ------------------------------------------------------------ hooks

    async def insert_hook(self, hook: port.HookRow) -> bool:
        self._holdings.clear()
        attributes = codecs.encode(dict(hook.attributes))
        row = (hook.token, hook.run_id, hook.hook, attributes, self.now_us)
        return bool(self.db.execute(sql.INSERT_HOOK, row).rowcount)

    async def bind_hook(self, hook: port.HookRow) -> bool:
        self._holdings.clear()
        bind = (hook.hook, codecs.encode(dict(hook.attributes)), hook.token, hook.run_id)
        return bool(self.db.execute(sql.BIND_HOOK, bind).rowcount)

    async def hook_holder(self, token: str) -> port.HookHolder | None:
        row = self.db.execute(sql.GET_HOOK, (token,)).fetchone()
        return None if row is None else port.HookHolder(row["run_id"], row["hook"])

    async def hook_run(self, token: str) -> tuple[types.RunRecord, int] | None:
        holder = await self.hook_holder(token)
        if holder is None:
            return None
        run = await self.get_run(holder.run_id)
        assert run is not None, "a hook goes with its run"
        return run, holder.hook

    async def run_hooks(self, run_id: str) -> list[types.HookRecord]:
        rows = self.db.execute(sql.LIST_RUN_HOOKS, (run_id,)).fetchall()
        return [codecs.columns.hook(row) for row in rows]

    async def carry_hooks(self, old_run_id: str, new_run_id: str) -> None:
        self._holdings.clear()
        self.db.execute(sql.MOVE_RUN_HOOKS, (new_run_id, old_run_id))
        self.db.execute(sql.MOVE_HOOK_RESUMES, (new_run_id, old_run_id))

    async def resumed(self, token: str, resume_id: str) -> str | None:
        row = self.db.execute(sql.GET_RESUME, (token, resume_id)).fetchone()
        return None if row is None else str(row["run_id"])

    async def record_resume(self, token: str, resume_id: str, run_id: str) -> bool:
        return bool(self.db.execute(sql.INSERT_RESUME, (token, resume_id, run_id)).rowcount)

    # ------------------------------------------------------------ updates

    async def update_seq(self, run_id: str, update_id: str) -> int | None:
        row = self.db.execute(sql.GET_UPDATE, (run_id, update_id)).fetchone()
        return None if row is None else int(row[0])

    async def record_update(self, run_id: str, update_id: str, seq: int) -> bool:
        return bool(self.db.execute(sql.INSERT_UPDATE, (run_id, update_id, seq)).rowcount)

    # ------------------------------------------------------------ slots

    async def slot_states(self, pairs: Sequence[port.Pair]) -> list[port.PairState]:
        states = []
        for pair in pairs:
            states.append(port.pair_state_of(self.db.execute(sql.SLOT_STATE, pair).fetchone()))
        return states

    async def insert_slots(self, slots: Sequence[port.SlotRow], *, holding: bool) -> None:
        self._holdings.clear()
        self.db.executemany(
            sql.INSERT_SLOT,
            [
                (
                    *s.pair,
                    s.run_id,
                    codecs.encode(s.value),
                    s.limit,
                    int(holding),
                    s.hold,
                    s.priority,
                    s.burst,
                )
                for s in slots
            ],
        )

    def _dropped(self, statement: str, params: tuple[object, ...]) -> list[port.Pair]:
        return [(row["key"], row["ivalue"]) for row in self.db.execute(statement, params)]

    async def drop_run_slots(self, run_id: str) -> list[port.Pair]:
        # A run closes here: one look (unless its commit's read looked already)
        # says which of its slots, windowed claims and hook tokens exist, so
        # closing one that has none costs no statement.
        holdings = self._holdings.pop(run_id, None)
        if holdings is None:
            holdings = _holdings(self.db.execute(sql.RUN_HOLDINGS, (run_id,)).fetchone())
        return self._dropped(sql.DROP_RUN_SLOTS, (run_id,)) if holdings[0] else []

    async def drop_hold(self, run_id: str, hold: int) -> list[port.Pair]:
        return self._dropped(sql.DROP_HOLD, (run_id, hold))

    async def drop_holds(self, run_id: str) -> list[port.Pair]:
        return self._dropped(sql.DROP_HOLDS, (run_id,))

    async def first_waiter(self, pair: port.Pair) -> port.Waiter | None:
        row = self.db.execute(sql.FIRST_WAITER, pair).fetchone()
        return None if row is None else (row["run_id"], row["hold"])

    async def waiting_views(
        self, run_id: str, hold: int, near: Sequence[port.Pair] = ()
    ) -> list[port.PairView]:
        db, views = self.db, []
        for row in db.execute(sql.RUN_WAITING, (run_id, hold)).fetchall():
            pair = (row["key"], row["ivalue"])
            (holding,) = db.execute(sql.COUNT_HOLDING, pair).fetchone()
            first = db.execute(sql.FIRST_WAITER, pair).fetchone()
            head = (first["run_id"], first["hold"])
            views.append(port.PairView(pair, row["lim"], holding, head, row["burst"]))
        return views

    async def promote(self, run_id: str, hold: int) -> None:
        self.db.execute(sql.PROMOTE_SLOTS, (run_id, hold))
        if hold == 0:
            (workflow,) = self.db.execute(sql.GET_WORKFLOW_NAME, (run_id,)).fetchone()
            item = (run_id, workflow_item_id(run_id), "workflow", workflow, 0, 1, b"")
            self.db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, self.now_us, None, 0, None, 0))
            self.signals.add(work_topic(workflow))

    async def carry_slots(self, old_run_id: str, new_run_id: str) -> None:
        self._holdings.clear()
        self.db.execute(sql.MOVE_RUN_SLOTS, (new_run_id, old_run_id))

    async def sample_slots(self, pairs: Sequence[port.Pair], minute: datetime) -> None:
        at = codecs.to_micros(minute)
        self.db.executemany(sql.SAMPLE_SLOTS, [(*pair, at) for pair in pairs])

    async def drop_slot_samples(self, before: datetime, limit: int) -> int:
        return int(
            self.db.execute(sql.DROP_SLOT_SAMPLES, (codecs.to_micros(before), limit)).rowcount
        )

    # ------------------------------------------------------------ key limits

    async def key_queued(self, key: str, ivalue: str) -> bool | None:
        row = self.db.execute(sql.KEY_QUEUED, (key, ivalue)).fetchone()
        return None if row is None else bool(row["queued"])

    async def key_row(self, key: str) -> port.KeyRow | None:
        row = self.db.execute(sql.KEY_ROW, (key,)).fetchone()
        return None if row is None else key_row(row)

    async def key_waiting(self, key: str) -> list[port.Candidate]:
        found = self.db.execute(sql.KEY_WAITING, (key,)).fetchall()
        return [key_candidate(row, row["ivalue"]) for row in found]

    async def key_share(self, key: str, ivalue: str) -> float:
        row = self.db.execute(sql.KEY_SHARE, (key, ivalue)).fetchone()
        return 0.0 if row is None else float(row["share"])

    async def put_key_share(self, key: str, ivalue: str, share: float, vtime: float) -> None:
        self.db.execute(sql.PUT_KEY_SHARE, (key, ivalue, share))
        self.db.execute(sql.PUT_KEY_VTIME, (vtime, key))

    async def key_line(
        self, key: str, after: tuple[float, str] | None, count: int
    ) -> list[port.LineEntry]:
        share, ivalue = after if after is not None else (-1.0, "")
        found = self.db.execute(sql.KEY_LINE, (key, share, ivalue, count)).fetchall()
        return [columns.key_line_entry(row) for row in found]

    async def key_pass(self, key: str, ivalue: str) -> tuple[float, bool]:
        row = self.db.execute(sql.KEY_PASS, (key, ivalue)).fetchone()
        return (0.0, False) if row is None else (float(row["share"]), bool(row["queued"]))

    async def put_key_pass(self, key: str, ivalue: str, share: float) -> None:
        self.db.execute(sql.PUT_KEY_PASS, (key, ivalue, share))

    async def leave_key_line(self, key: str, ivalue: str) -> None:
        self.db.execute(sql.LEAVE_KEY_LINE, (key, ivalue))

    async def put_key_limit(self, limit: types.KeyLimit) -> None:
        self.db.execute(sql.PUT_KEY_LIMIT, (limit.key, limit.limit, encode(limit)))

    async def drop_key_limit(self, key: str) -> None:
        self.db.execute(sql.DROP_KEY_LIMIT, (key,))
        self.db.execute(sql.DROP_KEY_SHARES, (key,))

    # ------------------------------------------------------------ rate tokens

    async def rate_tokens(self, pair: port.Pair, lapsed: datetime, count: int) -> list[port.Token]:
        self.db.execute(sql.DROP_LAPSED_TOKENS, (*pair, codecs.to_micros(lapsed)))
        found = self.db.execute(sql.NEWEST_TOKENS, (*pair, count)).fetchall()
        return [
            port.Token(codecs.from_micros(row["at"]), row["run_id"], row["lim"], row["per"])
            for row in found
        ]

    async def tokens_after(self, pair: port.Pair, since: datetime, count: int) -> list[port.Token]:
        found = self.db.execute(
            sql.TOKENS_AFTER, (*pair, codecs.to_micros(since), count)
        ).fetchall()
        return [
            port.Token(codecs.from_micros(row["at"]), row["run_id"], row["lim"], row["per"])
            for row in found
        ]

    async def insert_token(
        self, pair: port.Pair, number: int, token: port.Token, priority: int = 0
    ) -> None:
        at = codecs.to_micros(token.at)
        params = (*pair, at, token.run_id, number, token.limit, token.per, priority)
        self.db.execute(sql.INSERT_TOKEN, params)

    async def reserved_tokens(
        self, pair: port.Pair, after: datetime, priority: int
    ) -> list[port.Reserved]:
        found = self.db.execute(
            sql.RESERVED_TOKENS, (*pair, codecs.to_micros(after), priority)
        ).fetchall()
        return [
            port.Reserved(codecs.from_micros(row["at"]), row["run_id"], row["priority"])
            for row in found
        ]

    async def run_tokens(self, run_id: str) -> list[tuple[port.Pair, port.Token, int]]:
        found = self.db.execute(sql.RUN_TOKENS, (run_id,)).fetchall()
        return [
            (
                (row["key"], row["ivalue"]),
                port.Token(codecs.from_micros(row["at"]), run_id, row["lim"], row["per"]),
                row["number"],
            )
            for row in found
        ]

    async def drop_token(self, pair: port.Pair, run_id: str, number: int) -> None:
        self.db.execute(sql.DROP_TOKEN, (*pair, run_id, number))

    # ------------------------------------------------------------ work

    async def add_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> bool:
        params = codecs.work_params(run_id, new, placed)
        return bool(self.db.execute(sql.INSERT_WORK_IF_ABSENT, params).rowcount)

    async def put_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> None:
        self.db.put_work(codecs.work_params(run_id, new, placed))

    async def get_work(self, run_id: str, item_id: str) -> port.QueuedWork | None:
        row = self.db.execute(sql.GET_WORK, (run_id, item_id)).fetchone()
        return None if row is None else codecs.columns.queued(row)

    async def set_rewake(self, run_id: str, item_id: str) -> None:
        self.db.execute(sql.SET_REWAKE, (run_id, item_id))

    async def set_available(self, run_id: str, item_id: str, at: datetime) -> None:
        self.db.execute(sql.SET_AVAILABLE, (codecs.to_micros(at), run_id, item_id))

    async def lease_work(self, run_id: str, item_id: str, lease: port.LeaseRow) -> None:
        due, expires = codecs.to_micros(lease.available_at), codecs.to_micros(lease.expires_at)
        owner = (lease.worker_id, lease.token)
        self.db.execute(sql.LEASE_WORK, (due, *owner, expires, lease.attempt, run_id, item_id))

    async def rewake_item(self, run_id: str, item_id: str) -> None:
        self.db.execute(sql.REWAKE_ON_ACK, (self.now_us, run_id, item_id))

    async def delete_item(self, run_id: str, item_id: str) -> None:
        self.db.deleted.append((run_id, item_id))  # held back: put_work may reuse its row

    async def lease_holder(self, lease: types.WorkItem) -> str | None:
        row = self.db.execute(sql.LEASE_HOLDER, (lease.run_id, lease.id)).fetchone()
        return None if row is None else row["owner"]

    async def drop_cancelled_work(self, run_id: str) -> list[port.DroppedWork]:
        rows = self.db.execute(sql.DROP_CANCELLED_WORK, (run_id, self.now_us)).fetchall()
        return [
            port.DroppedWork(row["kind"], row["number"], row["attempt"], bool(row["in_flight"]))
            for row in rows
        ]

    # ------------------------------------------------------------ workers

    async def workers(self) -> list[port.Beat]:
        return [codecs.columns.worker(row) for row in self.db.execute(sql.WORKERS)]

    async def worker(self, worker_id: str) -> port.Beat | None:
        row = self.db.execute(sql.WORKER, (worker_id,)).fetchone()
        return None if row is None else codecs.columns.worker(row)

    async def put_worker(self, worker: port.Beat) -> None:
        self.db.execute(sql.PUT_WORKER, worker_params(worker, codecs.to_micros))

    async def drop_workers(self, beaten_before: datetime) -> None:
        self.db.execute(sql.DROP_WORKERS, (codecs.to_micros(beaten_before),))

    async def revoke_leases(self, worker_id: str) -> None:
        self.db.execute(sql.REVOKE_LEASES, (worker_id,))
        self.signal(WORK_TOPIC)

    async def deployment(self, build_id: str) -> dict[str, types.Pin] | None:
        rows = self.db.execute(sql.DEPLOYMENT, (build_id,)).fetchall()
        return {row["workflow"]: row["pin"] for row in rows} if rows else None

    async def put_deployment(self, build_id: str, workflows: Mapping[str, types.Pin]) -> None:
        first = self.db.execute(sql.DEPLOYMENT, (build_id,)).fetchone()
        since = self.now_us if first is None else first["registered_at"]
        self.db.execute(sql.DROP_DEPLOYMENT, (build_id,))
        self.db.executemany(
            sql.PUT_DEPLOYMENT, [(build_id, name, pin, since) for name, pin in workflows.items()]
        )

    async def run_builds(self, run_ids: Collection[str]) -> list[port.RunBuild]:
        wanted = list(run_ids)
        rows = self.db.execute(sql.run_builds_sql(len(wanted)), wanted) if wanted else []
        return [port.RunBuild(r["id"], r["workflow"], r["build_id"], r["pin"]) for r in rows]

    async def set_run_build(self, run_id: str, build_id: str, pin: types.Pin) -> None:
        self.db.execute(sql.SET_RUN_BUILD, (build_id, pin, run_id))

    # ------------------------------------------------------------ streams

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        (first,) = self.db.execute(sql.NEXT_STREAM_SEQ, (run_id, name)).fetchone()
        self.db.executemany(
            sql.INSERT_STREAM,
            [(run_id, name, first + n, data, self.now_us) for n, data in enumerate(chunks)],
        )
        return int(first)

    async def close_stream(self, run_id: str, name: str) -> None:
        self.db.execute(sql.CLOSE_STREAM, (run_id, name, self.now_us))

    async def stream_closed(self, run_id: str, name: str) -> bool:
        return self.db.execute(sql.STREAM_CLOSED, (run_id, name)).fetchone() is not None

    # ------------------------------------------------------------ retention

    async def prunable(
        self, closed_before: datetime, limit: int, *, status: types.RunStatus | None = None
    ) -> list[str]:
        params = (codecs.to_micros(closed_before), limit, None if status is None else status.value)
        return [row["id"] for row in self.db.execute(sql.PRUNABLE_RUNS, params)]

    async def release_lapsed_claims(self) -> None:
        self.db.execute(sql.RELEASE_LAPSED_CLAIMS, (self.now_us,))

    async def retire_claims(self, run_ids: Sequence[str], *, release: bool) -> None:
        statement = sql.RELEASE_RUN_CLAIMS if release else sql.TOMBSTONE_RUN_CLAIMS
        self.db.executemany(statement, [(run_id,) for run_id in run_ids])

    async def release_tombstones(self) -> None:
        self.db.execute(sql.RELEASE_TOMBSTONES)

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        for statement in sql.PRUNE_RUN:
            self.db.executemany(statement, [(run_id,) for run_id in run_ids])

    # ------------------------------------------------------------ schedules

    async def insert_schedule(self, record: types.ScheduleRecord) -> bool:
        return bool(self.db.execute(sql.INSERT_SCHEDULE, codecs.schedule_params(record)).rowcount)

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        row = self.db.execute(sql.GET_SCHEDULE, (schedule_id,)).fetchone()
        return None if row is None else codecs.columns.schedule(row)

    async def put_schedule(self, record: types.ScheduleRecord) -> None:
        params = (
            int(record.paused),
            record.note,
            codecs.to_micros_or_none(record.next_fire_at),
            codecs.to_micros_or_none(record.buffered_at),
            codecs.to_micros_or_none(record.wake_at),
            record.version,
            codecs.to_micros(record.updated_at),
            record.id,
        )
        self.db.execute(sql.PUT_SCHEDULE, params)

    async def get_schedules(self, schedule_ids: Sequence[str]) -> list[types.ScheduleRecord]:
        found = []
        for schedule_id in sorted(set(schedule_ids)):  # in-process: a statement costs no trip
            row = self.db.execute(sql.GET_SCHEDULE, (schedule_id,)).fetchone()
            if row is not None:
                found.append(codecs.columns.schedule(row))
        return found

    async def put_schedules(self, records: Sequence[types.ScheduleRecord]) -> None:
        for record in records:
            await self.put_schedule(record)

    async def existing_runs(self, run_ids: Sequence[str]) -> set[str]:
        return {
            run_id
            for run_id in run_ids
            if self.db.execute(sql.RUN_EXISTS, (run_id,)).fetchone() is not None
        }
