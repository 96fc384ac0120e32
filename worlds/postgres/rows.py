"""The PostgreSQL world's rows port: ``worlds._flows.rows.Rows`` over one transaction.

``PostgresRows`` is one transaction's state (its connection, its clock, the
event rows it queued, the topics to notify once it commits) and every row
operation the flows ask for, each a statement or a few of
``worlds.postgres.statements``, awaited on asyncpg. Locks are taken here: a
run's row (``FOR UPDATE``) whenever a flow reads a run it may write, a claim's
row when a claim is found held, the advisory locks of limited pairs (sorted,
so two transactions taking several never deadlock on them) before their slots
are read or dropped. Reading the clock again after a lock (``_tick``) keeps a
run's log from going back in time.

``PostgresRows(..., single_statement=True)`` is for a connection outside any
transaction: it refuses a second statement, so a flow that writes in one
statement (the plain start) is atomic without ``BEGIN`` and ``COMMIT``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import asyncpg
import msgspec

from worlds import _columns as columns
from worlds import types
from worlds._columns import claim_params, encode, key_candidate, key_row, worker_params
from worlds._flows import rows as port
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.postgres.connection import RETRYABLE
from worlds.protocol import WORK_TOPIC, work_topic
from worlds.semantics import decode_release_on, index_value, workflow_item_id

if TYPE_CHECKING:
    from worlds.postgres.connection import Connection

__all__ = ["PostgresRows", "is_run_id_taken", "new_token"]

_EventRow = tuple[int, str, bytes]
KEY_LOCK = "*"
"""The advisory lock of a key's limit is its pair with this value, which no attribute
value's index text is (they all have a type prefix, ``s:``, ``i:``, ...)."""
_MUTABLE_SCHEDULE_FIELDS = ("paused", "note", "next_fire_at", "buffered_at", "wake_at")
"""What an update of a schedule may change (``PUT_SCHEDULE``'s $2 to $6)."""


def _schedule_state(record: types.ScheduleRecord) -> tuple[object, ...]:
    """``PUT_SCHEDULE``'s parameters for ``record``."""
    mutable = [getattr(record, field) for field in _MUTABLE_SCHEDULE_FIELDS]
    return (record.id, *mutable, record.version, record.updated_at)


def new_token() -> int:
    """A fresh fencing token (a positive 63-bit integer)."""
    return secrets.randbits(62) + 1


def is_run_id_taken(exc: asyncpg.exceptions.UniqueViolationError) -> bool:
    """Whether ``exc`` says the run id of a new run is taken."""
    return getattr(exc, "constraint_name", None) in ("runs_pkey", "events_pkey")


_KEEP_KEY_ROWS = frozenset(
    {
        sql.HAS_KEY_LIMIT,
        sql.KEY_ROW,
        sql.KEY_LINE,
        sql.KEY_SHARE,
        sql.KEY_PASS,
        sql.KEY_QUEUED,
        sql.PUT_KEY_PASS,
        sql.LEAVE_KEY_LINE,
        sql.LOCK_PAIRS,
        sql.SLOT_STATE,
        sql.FIRST_WAITER,
        sql.RUN_WAITING_VIEWS,
        sql.RUN_SLOT_PAIRS,
        sql.SAMPLE_SLOTS,
        sql.GET_RUN,
        sql.LOCK_RUN,
        sql.LOCK_LEASE,
        sql.READ_EVENTS,
    }
)
"""Statements that never change a key's row (``KEY_ROW``: its limit, pass clock and
slots held): the ones a promotion runs between two looks at its keys. Any other
statement forgets the key rows read (``PostgresRows.key_row``)."""


class _Savepoint(NamedTuple):
    transaction: Any
    signals: frozenset[str]
    pending: dict[str, list[_EventRow]]


class PostgresRows:
    """The rows of one PostgreSQL transaction.

    Args:
        conn: the transaction's connection.
        channel: the work channel to notify in the transaction, or ``None``: the
            caller notifies ``signals`` after the commit.
        clock: the world's clock (the server's, as the world estimates it).
        single_statement: ``conn`` runs outside a transaction; a second
            statement is a bug (``AssertionError``).
    """

    def __init__(
        self,
        conn: Connection,
        channel: str | None,
        clock: Callable[[], datetime] = types.utcnow,
        *,
        single_statement: bool = False,
    ) -> None:
        self.conn = conn
        self.channel = channel
        self._clock = clock
        self.now = clock()
        self.signals: set[str] = set()
        """The topics to notify once the transaction committed."""
        self._pending: dict[str, list[_EventRow]] = {}
        self._attributes: dict[str, tuple[dict[str, types.AttributeValue], bytes]] = {}
        """By run: its attributes as read (or created) and their encoding."""
        self._statements_left = 1 if single_statement else -1
        self._locked_pairs: set[port.Pair] = set()
        self._key_rows: dict[str, port.KeyRow | None] = {}
        """By key: its row as read in this transaction since the last statement that
        may have changed it (``_KEEP_KEY_ROWS`` lists those that cannot)."""

    # ------------------------------------------------------------ statements

    def _count(self, statement: str) -> None:
        if self._statements_left == 0:
            raise AssertionError("a second statement outside a transaction")
        self._statements_left -= 1
        if statement not in _KEEP_KEY_ROWS:
            self._key_rows.clear()  # it may change a key's slots or limit: read them again

    async def _execute(self, statement: str, *args: object) -> str:
        self._count(statement)
        result: str = await self.conn.execute(statement, *args)
        return result

    async def _fetch(self, statement: str, *args: object) -> list[asyncpg.Record]:
        self._count(statement)
        return await self.conn.fetch(statement, *args)

    async def _fetchrow(self, statement: str, *args: object) -> asyncpg.Record | None:
        self._count(statement)
        return await self.conn.fetchrow(statement, *args)

    async def _fetchval(self, statement: str, *args: object) -> Any:
        self._count(statement)
        return await self.conn.fetchval(statement, *args)

    def _tick(self) -> None:
        """Read the clock again, after taking locks, so logs never go back in time."""
        self.now = max(self.now, self._clock())

    def _run(self, row: asyncpg.Record) -> types.RunRecord:
        run = codecs.columns.run(row)
        self._attributes[run.id] = (run.attributes, row["attributes"])
        if row["last_at"] is not None:
            self.now = max(self.now, row["last_at"])  # never before the log's last event
        return run

    async def _lock_pairs(self, pairs: Sequence[port.Pair]) -> None:
        ordered = sorted(set(pairs) - self._locked_pairs)
        if ordered:
            keys, values = [k for k, _ in ordered], [v for _, v in ordered]
            await self._execute(sql.LOCK_PAIRS, keys, values)
            self._locked_pairs.update(ordered)

    # ------------------------------------------------------------ the transaction

    def signal(self, topic: str) -> None:
        self.signals.add(topic)

    def new_token(self) -> int:
        return new_token()

    async def savepoint(self) -> object:
        transaction = self.conn.transaction()
        await transaction.start()
        pending = {run_id: list(rows) for run_id, rows in self._pending.items()}
        return _Savepoint(transaction, frozenset(self.signals), pending)

    async def rollback_to(self, savepoint: object) -> None:
        assert isinstance(savepoint, _Savepoint)
        self._key_rows.clear()
        await savepoint.transaction.rollback()
        self.signals, self._pending = set(savepoint.signals), savepoint.pending

    async def release(self, savepoint: object) -> None:
        assert isinstance(savepoint, _Savepoint)
        await savepoint.transaction.commit()

    def fails_transaction(self, exc: Exception) -> bool:
        return isinstance(exc, RETRYABLE)

    # ------------------------------------------------------------ runs and logs

    async def get_run(self, run_id: str, *, lock: bool = True) -> types.RunRecord | None:
        row = await self._fetchrow(sql.LOCK_RUN if lock else sql.GET_RUN, run_id)
        if lock:
            self._tick()
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
        run = await self.get_run(run_id)
        if run is None:
            return None
        if lease is None or run.status.is_closed:
            return run, None
        held = await self._fetchrow(sql.LOCK_LEASE, lease.id, run.id, worker_id, lease.token)
        return run, None if held is None else port.HeldLease(held["kind"], bool(held["rewake"]))

    async def insert_run(
        self,
        run: types.RunRecord,
        created: types.RunCreated,
        *,
        wake_at: datetime | None,
        saved_next: bool = False,
    ) -> None:
        attributes = run.attributes
        encoded = codecs.encode(attributes)
        keys = list(attributes)
        try:
            await self._execute(
                sql.CREATE_RUN,
                run.id,
                run.workflow,
                self.now,
                encoded,
                keys,
                [index_value(attributes[key]) for key in keys],
                codecs.encode(created),
                workflow_item_id(run.id),
                self.channel,
                wake_at,
                run.admitted_at,
            )
        except asyncpg.exceptions.UniqueViolationError as exc:
            if is_run_id_taken(exc):
                raise port.IdTaken(run.id) from None
            raise
        self._attributes[run.id] = (attributes, encoded)
        if wake_at is not None:
            self.signals.add(work_topic(run.workflow))

    def append(self, run_id: str, event: types.EventKind) -> None:
        row = (event.seq, codecs.EVENT_TAGS[type(event)], codecs.encode(event))
        self._pending.setdefault(run_id, []).append(row)

    async def save_run(self, run: types.RunRecord) -> None:
        known = self._attributes.get(run.id)
        if known is not None and known[0] is run.attributes:
            encoded = known[1]
        else:
            encoded = codecs.encode(run.attributes)
            self._attributes[run.id] = (run.attributes, encoded)
        rows = self._pending.pop(run.id, [])
        await self._execute(sql.SAVE_RUN, *codecs.save_params(run, encoded, rows, self.now))

    async def index_attributes(
        self, run_id: str, attributes: Mapping[str, types.AttributeValue]
    ) -> None:
        keys = list(attributes)
        ivalues = [index_value(attributes[key]) for key in keys]
        await self._execute(sql.UPSERT_ATTRIBUTES, run_id, keys, ivalues)

    async def drop_attribute(self, run_id: str, key: str) -> None:
        await self._execute(sql.DROP_ATTRIBUTE, run_id, key)

    async def events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        rows = await self._fetch(sql.READ_EVENTS, run_id, after_seq)
        return [codecs.decode_event(row["data"], row["seq"], row["at"]) for row in rows]

    async def hook_payloads(self, run_id: str) -> list[types.EventKind]:
        rows = await self._fetch(sql.READ_HOOK_PAYLOADS, run_id)
        return [codecs.decode_event(row["data"]) for row in rows]

    async def rewrite_created(self, run_id: str, created: types.RunCreated) -> None:
        await self._execute(sql.REWRITE_CREATED, run_id, codecs.encode(created))

    async def set_admitted(self, run_id: str, at: datetime) -> None:
        await self._execute(sql.SET_ADMITTED, run_id, at)

    async def open_runs_with(self, key: str, value: types.AttributeValue) -> list[types.RunRecord]:
        rows = await self._fetch(sql.LOCK_OPEN_CHILDREN, key, index_value(value))
        self._tick()
        return [self._run(row) for row in rows]

    # ------------------------------------------------------------ claims

    async def get_claim(self, pair: port.Pair, *, lock: bool = False) -> port.HeldClaim | None:
        row = await self._fetchrow(sql.LOCK_CLAIM if lock else sql.GET_CLAIM, *pair)
        return None if row is None else codecs.columns.held(row)

    async def claim_if_free(self, claim: port.ClaimRow) -> int | None:
        generation: int | None = await self._fetchval(sql.CLAIM_IF_FREE, *claim_params(claim))
        return generation

    async def put_claim(self, claim: port.ClaimRow, generation: int) -> None:
        await self._execute(sql.PUT_CLAIM, *claim_params(claim, generation))

    async def windowed_claims(self, run_id: str) -> list[port.Windowed]:
        rows = await self._fetch(sql.WINDOWED_CLAIMS, run_id)
        return [
            port.Windowed(
                (row["key"], row["ivalue"]), row["ttl"], decode_release_on(row["release_on"])
            )
            for row in rows
        ]

    async def release_claim(self, pair: port.Pair) -> None:
        await self._execute(sql.RELEASE_CLAIM, *pair)

    async def lapse_claim(self, pair: port.Pair, at: datetime) -> None:
        await self._execute(sql.SET_LAPSES_AT, *pair, at)

    async def carry_claims(self, old_run_id: str, new_run_id: str) -> None:
        await self._execute(sql.MOVE_RUN_CLAIMS, new_run_id, old_run_id)

    # ------------------------------------------------------------ hooks

    async def insert_hook(self, hook: port.HookRow) -> bool:
        attributes = codecs.encode(dict(hook.attributes))
        row = (hook.token, hook.run_id, hook.hook, attributes, self.now)
        return await self._fetchval(sql.INSERT_HOOK, *row) is not None

    async def bind_hook(self, hook: port.HookRow) -> bool:
        bind = (hook.hook, codecs.encode(dict(hook.attributes)), hook.token, hook.run_id)
        return await self._fetchval(sql.BIND_HOOK, *bind) is not None

    async def hook_holder(self, token: str) -> port.HookHolder | None:
        row = await self._fetchrow(sql.HOOK_HOLDER, token)
        return None if row is None else port.HookHolder(row["run_id"], row["hook"])

    async def hook_run(self, token: str) -> tuple[types.RunRecord, int] | None:
        while True:
            seen = await self.hook_holder(token)
            if seen is None:
                return None
            # Hooks are created and disposed of under their run's lock: once it
            # is held, a hook still there stays until this transaction ends.
            run = await self.get_run(seen.run_id)
            holder = await self.hook_holder(token)
            if run is not None and holder is not None and holder.run_id == seen.run_id:
                return run, holder.hook

    async def run_hooks(self, run_id: str) -> list[types.HookRecord]:
        return [codecs.columns.hook(row) for row in await self._fetch(sql.LIST_RUN_HOOKS, run_id)]

    async def carry_hooks(self, old_run_id: str, new_run_id: str) -> None:
        await self._execute(sql.MOVE_RUN_HOOKS, new_run_id, old_run_id)
        await self._execute(sql.MOVE_HOOK_RESUMES, new_run_id, old_run_id)

    async def resumed(self, token: str, resume_id: str) -> str | None:
        seen = await self._fetchval(sql.RESUMED, token, resume_id)
        return None if seen is None else str(seen)

    async def record_resume(self, token: str, resume_id: str, run_id: str) -> bool:
        return await self._fetchval(sql.RECORD_RESUME, token, resume_id, run_id) is not None

    # ------------------------------------------------------------ updates

    async def update_seq(self, run_id: str, update_id: str) -> int | None:
        seq = await self._fetchval(sql.UPDATE_SEQ, run_id, update_id)
        return None if seq is None else int(seq)

    async def record_update(self, run_id: str, update_id: str, seq: int) -> bool:
        return await self._fetchval(sql.RECORD_UPDATE, run_id, update_id, seq) is not None

    # ------------------------------------------------------------ slots

    async def slot_states(self, pairs: Sequence[port.Pair]) -> list[port.PairState]:
        await self._lock_pairs(pairs)
        states = []
        for pair in pairs:
            row = await self._fetchrow(sql.SLOT_STATE, *pair)
            assert row is not None
            states.append(port.pair_state_of(row))
        return states

    async def insert_slots(self, slots: Sequence[port.SlotRow], *, holding: bool) -> None:
        if not slots:
            return
        if slots[0].hold:  # a hold() block: one row, at its one pair
            for s in slots:
                value = codecs.encode(s.value)
                params = (*s.pair, s.run_id, value, s.limit, holding, s.hold, s.priority)
                await self._execute(sql.INSERT_HOLD, *params)
            return
        await self._execute(
            sql.INSERT_SLOTS,
            [s.pair[0] for s in slots],
            [s.pair[1] for s in slots],
            [codecs.encode(s.value) for s in slots],
            slots[0].run_id,
            [s.limit for s in slots],
            holding,
            slots[0].priority,
            [s.burst for s in slots],
        )

    async def _drop(self, pairs_sql: str, drop_sql: str, *params: object) -> list[port.Pair]:
        """Lock the pairs ``pairs_sql`` finds, then drop the rows ``drop_sql`` names."""
        rows = await self._fetch(pairs_sql, *params)
        freed = [(row["key"], row["ivalue"]) for row in rows]
        if freed:
            await self._lock_pairs(freed)
            await self._execute(drop_sql, *params)
        return freed

    async def drop_run_slots(self, run_id: str) -> list[port.Pair]:
        return await self._drop(sql.RUN_SLOT_PAIRS, sql.DROP_RUN_SLOTS, run_id)

    async def drop_hold(self, run_id: str, hold: int) -> list[port.Pair]:
        return await self._drop(sql.HOLD_PAIR, sql.DROP_HOLD, run_id, hold)

    async def drop_holds(self, run_id: str) -> list[port.Pair]:
        return await self._drop(sql.RUN_HOLD_PAIRS, sql.DROP_HOLDS, run_id)

    async def first_waiter(self, pair: port.Pair) -> port.Waiter | None:
        row = await self._fetchrow(sql.FIRST_WAITER, *pair)
        return None if row is None else (row["run_id"], row["hold"])

    async def waiting_views(
        self, run_id: str, hold: int, near: Sequence[port.Pair] = ()
    ) -> list[port.PairView]:
        await self._lock_pairs(near)  # read once, under the locks, when they are all
        rows = await self._fetch(sql.RUN_WAITING_VIEWS, run_id, hold)
        pairs = [(row["key"], row["ivalue"]) for row in rows]
        if not set(pairs) <= self._locked_pairs:
            await self._lock_pairs(pairs)  # its other pairs; a deadlock is retried
            rows = await self._fetch(sql.RUN_WAITING_VIEWS, run_id, hold)  # under the locks
        views = []
        for row in rows:
            first_run, first_hold = row["first_waiter"]
            pair = (row["key"], row["ivalue"])
            head = (first_run, int(first_hold))
            views.append(port.PairView(pair, row["lim"], row["holding"], head, row["burst"]))
        return views

    async def promote(self, run_id: str, hold: int) -> None:
        if hold:
            await self._execute(sql.PROMOTE_HOLD, run_id, hold)
            return
        await self._execute(sql.PROMOTE, run_id, workflow_item_id(run_id), self.now)
        self.signals.add(WORK_TOPIC)

    async def carry_slots(self, old_run_id: str, new_run_id: str) -> None:
        await self._execute(sql.MOVE_RUN_SLOTS, new_run_id, old_run_id)

    async def sample_slots(self, pairs: Sequence[port.Pair], minute: datetime) -> None:
        keys, values = [p[0] for p in pairs], [p[1] for p in pairs]
        await self._execute(sql.SAMPLE_SLOTS, keys, values, minute)

    async def drop_slot_samples(self, before: datetime, limit: int) -> int:
        done = await self._execute(sql.DROP_SLOT_SAMPLES, before, limit)
        return int(done.split()[-1])

    # ------------------------------------------------------------ key limits

    async def key_queued(self, key: str, ivalue: str) -> bool | None:
        # No lock: a start that waits behind the runs at its (locked) pair changes
        # nothing at its key while its value is in the key's line.
        row = await self._fetchrow(sql.KEY_QUEUED, key, ivalue)
        return None if row is None else bool(row["queued"])

    async def key_row(self, key: str) -> port.KeyRow | None:
        # Every close of a limited run asks about its key: a key without a limit
        # costs one index probe and no lock. A limit set concurrently applies to the
        # admissions that begin after it committed (like a lowered one, it takes no
        # slot away), so only a key that has one is locked, then read again.
        # A promotion asks about its keys several times: under the lock the row is
        # this transaction's to change, so it is read again only after a write.
        if key in self._key_rows:
            return self._key_rows[key]
        if (key, KEY_LOCK) not in self._locked_pairs:
            if await self._fetchrow(sql.HAS_KEY_LIMIT, key) is None:
                self._key_rows[key] = None
                return None
            await self._lock_pairs([(key, KEY_LOCK)])
        row = await self._fetchrow(sql.KEY_ROW, key)
        found = None if row is None else key_row(row)
        self._key_rows[key] = found
        return found

    async def key_waiting(self, key: str) -> list[port.Candidate]:
        found = await self._fetch(sql.KEY_WAITING, key)
        return [key_candidate(row, row["ivalue"]) for row in found]

    async def key_share(self, key: str, ivalue: str) -> float:
        row = await self._fetchrow(sql.KEY_SHARE, key, ivalue)
        return 0.0 if row is None else float(row["share"])

    async def put_key_share(self, key: str, ivalue: str, share: float, vtime: float) -> None:
        await self._execute(sql.PUT_KEY_SHARE, key, ivalue, share, vtime)

    async def key_line(
        self, key: str, after: tuple[float, str] | None, count: int
    ) -> list[port.LineEntry]:
        share, ivalue = after if after is not None else (-1.0, "")
        found = await self._fetch(sql.KEY_LINE, key, share, ivalue, count)
        return [columns.key_line_entry(row) for row in found]

    async def key_pass(self, key: str, ivalue: str) -> tuple[float, bool]:
        row = await self._fetchrow(sql.KEY_PASS, key, ivalue)
        return (0.0, False) if row is None else (float(row["share"]), bool(row["queued"]))

    async def put_key_pass(self, key: str, ivalue: str, share: float) -> None:
        await self._execute(sql.PUT_KEY_PASS, key, ivalue, share)

    async def leave_key_line(self, key: str, ivalue: str) -> None:
        await self._execute(sql.LEAVE_KEY_LINE, key, ivalue)

    async def put_key_limit(self, limit: types.KeyLimit) -> None:
        await self._lock_pairs([(limit.key, KEY_LOCK)])
        await self._execute(sql.PUT_KEY_LIMIT, limit.key, limit.limit, encode(limit))

    async def drop_key_limit(self, key: str) -> None:
        await self._lock_pairs([(key, KEY_LOCK)])
        await self._execute(sql.DROP_KEY_LIMIT, key)

    # ------------------------------------------------------------ rate tokens

    async def rate_tokens(self, pair: port.Pair, lapsed: datetime, count: int) -> list[port.Token]:
        await self._lock_pairs([pair])
        self._tick()
        await self._execute(sql.DROP_LAPSED_TOKENS, *pair, lapsed)
        found = await self._fetch(sql.NEWEST_TOKENS, *pair, count)
        return [port.Token(row["at"], row["run_id"], row["lim"], row["per"]) for row in found]

    async def tokens_after(self, pair: port.Pair, since: datetime, count: int) -> list[port.Token]:
        await self._lock_pairs([pair])
        found = await self._fetch(sql.TOKENS_AFTER, *pair, since, count)
        return [port.Token(row["at"], row["run_id"], row["lim"], row["per"]) for row in found]

    async def insert_token(
        self, pair: port.Pair, number: int, token: port.Token, priority: int = 0
    ) -> None:
        params = (token.at, token.run_id, number, token.limit, token.per, priority)
        await self._execute(sql.INSERT_TOKEN, *pair, *params)

    async def reserved_tokens(
        self, pair: port.Pair, after: datetime, priority: int
    ) -> list[port.Reserved]:
        await self._lock_pairs([pair])
        found = await self._fetch(sql.RESERVED_TOKENS, *pair, after, priority)
        return [port.Reserved(row["at"], row["run_id"], row["priority"]) for row in found]

    async def run_tokens(self, run_id: str) -> list[tuple[port.Pair, port.Token, int]]:
        found = await self._fetch(sql.RUN_TOKENS, run_id)
        return [
            (
                (row["key"], row["ivalue"]),
                port.Token(row["at"], run_id, row["lim"], row["per"]),
                row["number"],
            )
            for row in found
        ]

    async def drop_token(self, pair: port.Pair, run_id: str, number: int) -> None:
        await self._lock_pairs([pair])
        await self._execute(sql.DROP_TOKEN, *pair, run_id, number)

    # ------------------------------------------------------------ work

    @staticmethod
    def _work_params(
        run_id: str, new: types.NewWorkItem, placed: port.Placement
    ) -> tuple[object, ...]:
        return (
            placed.item_id,
            run_id,
            new.kind,
            placed.name,
            new.number,
            new.attempt,
            new.payload,
            placed.available_at,
            placed.owner,
            placed.token,
            placed.expires_at,
            placed.leased is not None,
        )

    async def add_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> bool:
        params = self._work_params(run_id, new, placed)
        return await self._fetchval(sql.INSERT_WORK_IF_ABSENT, *params) is not None

    async def put_work(self, run_id: str, new: types.NewWorkItem, placed: port.Placement) -> None:
        await self._execute(sql.REPLACE_WORK, *self._work_params(run_id, new, placed))

    async def get_work(self, run_id: str, item_id: str) -> port.QueuedWork | None:
        row = await self._fetchrow(sql.LOCK_WORK, item_id)
        return None if row is None else codecs.columns.queued(row)

    async def set_rewake(self, run_id: str, item_id: str) -> None:
        await self._execute(sql.SET_REWAKE, item_id)

    async def set_available(self, run_id: str, item_id: str, at: datetime) -> None:
        await self._execute(sql.SET_AVAILABLE, item_id, at)

    async def lease_work(self, run_id: str, item_id: str, lease: port.LeaseRow) -> None:
        owner = (lease.worker_id, lease.token, lease.expires_at)
        await self._execute(sql.LEASE_ONE, item_id, lease.available_at, *owner, lease.attempt)

    async def rewake_item(self, run_id: str, item_id: str) -> None:
        await self._execute(sql.REWAKE_ON_ACK, item_id, self.now)

    async def delete_item(self, run_id: str, item_id: str) -> None:
        await self._execute(sql.DELETE_WORK, item_id)

    async def lease_holder(self, lease: types.WorkItem) -> str | None:
        holder: str | None = await self._fetchval(sql.LEASE_HOLDER, lease.id)
        return holder

    async def drop_cancelled_work(self, run_id: str) -> list[port.DroppedWork]:
        rows = await self._fetch(sql.DROP_CANCELLED_WORK, run_id, self.now)
        return [
            port.DroppedWork(row["kind"], row["number"], row["attempt"], bool(row["in_flight"]))
            for row in rows
        ]

    # ------------------------------------------------------------ workers

    async def workers(self) -> list[port.Beat]:
        return [codecs.columns.worker(row) for row in await self._fetch(sql.WORKERS)]

    async def worker(self, worker_id: str) -> port.Beat | None:
        row = await self._fetchrow(sql.WORKER, worker_id)
        return None if row is None else codecs.columns.worker(row)

    async def put_worker(self, worker: port.Beat) -> None:
        await self._execute(sql.PUT_WORKER, *worker_params(worker, lambda moment: moment))

    async def drop_workers(self, beaten_before: datetime) -> None:
        await self._execute(sql.DROP_WORKERS, beaten_before)

    async def revoke_leases(self, worker_id: str) -> None:
        await self._execute(sql.REVOKE_LEASES, worker_id)
        self.signal(WORK_TOPIC)

    async def deployment(self, build_id: str) -> dict[str, types.Pin] | None:
        rows = await self._fetch(sql.DEPLOYMENT, build_id)
        return {row["workflow"]: row["pin"] for row in rows} if rows else None

    async def put_deployment(self, build_id: str, workflows: Mapping[str, types.Pin]) -> None:
        since = await self._fetchval(sql.FIRST_DEPLOYED, build_id) or self.now
        await self._execute(sql.DROP_DEPLOYMENT, build_id)
        names = list(workflows)
        await self._execute(
            sql.PUT_DEPLOYMENT, build_id, names, [workflows[name] for name in names], since
        )

    async def run_builds(self, run_ids: Collection[str]) -> list[port.RunBuild]:
        rows = await self._fetch(sql.RUN_BUILDS, list(run_ids))
        return [port.RunBuild(r["id"], r["workflow"], r["build_id"], r["pin"]) for r in rows]

    async def set_run_build(self, run_id: str, build_id: str, pin: types.Pin) -> None:
        await self._execute(sql.SET_RUN_BUILD, run_id, build_id, pin)

    # ------------------------------------------------------------ streams

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        first: int = await self._fetchval(sql.NEXT_STREAM_SEQ, run_id, name)
        await self._execute(sql.INSERT_STREAM, run_id, name, first, list(chunks), self.now)
        return first

    async def close_stream(self, run_id: str, name: str) -> None:
        await self._execute(sql.CLOSE_STREAM, run_id, name, self.now)

    async def stream_closed(self, run_id: str, name: str) -> bool:
        closed: bool = await self._fetchval(sql.STREAM_CLOSED, run_id, name)
        return closed

    # ------------------------------------------------------------ retention

    async def prunable(
        self, closed_before: datetime, limit: int, *, status: types.RunStatus | None = None
    ) -> list[str]:
        chosen = None if status is None else status.value
        rows = await self._fetch(sql.PRUNABLE_RUNS, closed_before, limit, chosen)
        return [row["id"] for row in rows]

    async def release_lapsed_claims(self) -> None:
        await self._execute(sql.RELEASE_LAPSED_CLAIMS, self.now)

    async def retire_claims(self, run_ids: Sequence[str], *, release: bool) -> None:
        if run_ids:
            statement = sql.RELEASE_RUN_CLAIMS if release else sql.TOMBSTONE_RUN_CLAIMS
            await self._execute(statement, list(run_ids))

    async def release_tombstones(self) -> None:
        await self._execute(sql.RELEASE_TOMBSTONES)

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            await self._execute(sql.DELETE_RUNS, list(run_ids))

    # ------------------------------------------------------------ schedules

    async def insert_schedule(self, record: types.ScheduleRecord) -> bool:
        # the columns of INSERT_SCHEDULE are the record's fields, in order
        fields = msgspec.structs.astuple(record)
        return await self._fetchval(sql.INSERT_SCHEDULE, *fields) is not None

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        row = await self._fetchrow(sql.LOCK_SCHEDULE, schedule_id)
        return None if row is None else codecs.columns.schedule(row)

    async def put_schedule(self, record: types.ScheduleRecord) -> None:
        await self._execute(sql.PUT_SCHEDULE, *_schedule_state(record))

    async def get_schedules(self, schedule_ids: Sequence[str]) -> list[types.ScheduleRecord]:
        rows = await self._fetch(sql.LOCK_SCHEDULES, sorted(set(schedule_ids)))
        self._tick()
        return [codecs.columns.schedule(row) for row in rows]

    async def put_schedules(self, records: Sequence[types.ScheduleRecord]) -> None:
        if records:  # one round trip: asyncpg pipelines the statements
            self._count(sql.PUT_SCHEDULE)
            await self.conn.executemany(sql.PUT_SCHEDULE, [_schedule_state(r) for r in records])

    async def existing_runs(self, run_ids: Sequence[str]) -> set[str]:
        if not run_ids:
            return set()
        return {row["id"] for row in await self._fetch(sql.EXISTING_RUNS, list(run_ids))}
