"""``sqlite:///path.db``: the embedded, durable world (the default).

Same semantics as ``worlds.memory``, stored in one SQLite file that any number
of processes on one machine may share. The file runs in WAL mode with
``synchronous=NORMAL``; every write is one ``BEGIN IMMEDIATE`` transaction, so
writers from several processes queue on SQLite's write lock instead of losing
updates, and a lock that is still busy after the busy timeout is retried.

Each world object owns one aiosqlite connection, opened on first use. A whole
operation (its transaction included) is one function over that connection,
and operations of one world object never interleave. The function runs
inline on the event loop when it cannot block: the connection is idle and
SQLite grants the write lock at once (small transactions in WAL mode take
tens of microseconds, less than a hop to another thread). Otherwise it runs
on aiosqlite's thread, where it may wait for the lock: one thread hop per
operation, however many statements it takes. WAL checkpoints run on a
background thread with a connection of their own, so no commit pays for one.

URL forms: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` and
``sqlite:///:memory:``. Query parameters: ``poll`` (seconds, default 0.05), the
longest ``wait`` sleeps before looking again for changes made by other
processes; ``busy_timeout`` (seconds, default 10), how long a statement waits
for another process's lock; ``inline`` (1 or 0, default 1), whether
operations may run on the event loop; ``max_pages`` (default 0, no limit), the
most pages (4 KiB each by default) the file may grow to, SQLite's
``max_page_count``.

Errors: the driver's errors leave every operation as the ``worlds.errors``
tree. A full disk (or ``max_pages`` reached) raises ``WorldFullError`` and
writes nothing of the failed operation (its transaction is rolled back); a
place where the file cannot be created or opened raises
``WorldMisconfiguredError``; a lock held past the busy timeout raises
``WorldUnavailableError``.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote

import aiosqlite
import anyio
import anyio.lowlevel
import anyio.to_thread

from worlds import _sqlite_schema as sql
from worlds._lifecycle import ClosesOnExit, WorldClosedError, translates_errors
from worlds._rules import claims, commits, requests, runs
from worlds._signals import SignalHub
from worlds._sqlite_tx import (
    Checkpointer,
    RollbackError,
    WouldBlockError,
    Writer,
    connection,
    execute,
    leased,
    new_token,
    retrying,
    run_once,
    transact,
)
from worlds._urls import redact_url
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC
from worlds.semantics import (
    decode_cursor,
    encode_cursor,
    index_value,
    lease_deadline,
    settled,
    workflow_item_id,
)
from worlds.types import (
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookReceived,
    HookRecord,
    NewWorkItem,
    RunPage,
    RunQuery,
    RunRecord,
    StepStarted,
    WorkItem,
    utcnow,
)

__all__ = ["SqliteWorld", "WorldClosedError"]

T = TypeVar("T")

_CHECKPOINT_EVERY = 64
"""Write transactions between two background checkpoints."""
_BACKSTOP_PAGES = 10_000
"""WAL pages after which a writer checkpoints itself (the background one fell behind)."""


def _parse_url(url: str) -> tuple[str, dict[str, float]]:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] != "sqlite":
        raise ValueError(f"not an SQLite world URL: {url!r}")
    location, _, query = rest.partition("?")
    if not location.startswith("/") or len(location) < 2:
        raise ValueError(
            f"SQLite world URL {url!r} has no path: use sqlite:///relative.db "
            "or sqlite:////absolute.db"
        )
    path = unquote(location[1:])
    options = {"poll": 0.05, "busy_timeout": 10.0, "inline": 1.0, "max_pages": 0.0}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in options:
            raise ValueError(f"unknown option {name!r} in {url!r}; known: {sorted(options)}")
        try:
            options[name] = float(value)
        except ValueError:
            raise ValueError(f"option {name!r} in {url!r} must be a number") from None
        if options[name] < 0:
            raise ValueError(f"option {name!r} in {url!r} must not be negative")
    if path != ":memory:":
        path = os.path.abspath(path)
    return path, options


_HUBS: dict[str, SignalHub] = {}
_HUBS_LOCK = threading.Lock()


def _hub_for(path: str) -> SignalHub:
    """The hub every world object on ``path`` in this process shares."""
    if path == ":memory:":
        return SignalHub()
    with _HUBS_LOCK:
        return _HUBS.setdefault(path, SignalHub())


@translates_errors
class SqliteWorld(ClosesOnExit):
    """A world stored in an SQLite file, shareable by processes on one machine.

    Args:
        url: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``,
            optionally with the query parameters the module describes. A relative
            path is resolved against the working directory when the world is
            created. Nothing is opened until the first operation, which
            creates the file and its parent directories.
        create: ``False``: the file must exist; the first operation raises
            ``WorldMisconfiguredError`` naming the resolved path otherwise.
        shared: ``True``: refuse ``sqlite:///:memory:``, which dies with the process.
    """

    protocol_version = PROTOCOL_VERSION

    def __init__(self, url: str, *, create: bool = True, shared: bool = False) -> None:
        self.url = url
        self.path, options = _parse_url(url)
        if shared and self.path == ":memory:":
            raise WorldMisconfiguredError(
                f"{url} is held in this process's memory and thrown away when it exits, "
                "but a world that outlives this process is needed here: use a file path"
            )
        self._create = create
        self.poll_interval = options["poll"]
        self._busy_pragma = f"PRAGMA busy_timeout = {int(options['busy_timeout'] * 1000)}"
        self._inline = bool(options["inline"])
        self._max_pages = int(options["max_pages"])
        self._guard = threading.Lock()
        self._conn: aiosqlite.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._writes = 0
        self._db: sqlite3.Connection | None = None
        self._connecting: anyio.Lock | None = None
        self._closed = False
        self._hub = _hub_for(self.path)

    def __repr__(self) -> str:
        return f"SqliteWorld({redact_url(self.url)!r})"

    async def close(self) -> None:
        """Close the connection; later calls raise ``WorldClosedError``."""
        self._closed = True
        self._hub.wake_all()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        self._db = None
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await anyio.to_thread.run_sync(checkpointer.stop().join)

    async def migrate(self) -> int:
        """Apply pending schema migrations (opening the file does it too)."""
        await self._connect()
        return sql.SCHEMA_VERSION

    async def info(self) -> dict[str, str | int]:
        """Path, schema version and run counts per status."""

        def body(db: sqlite3.Connection) -> list[tuple[str, int]]:
            return list(db.execute(sql.COUNT_RUNS_BY_STATUS).fetchall())

        facts: dict[str, str | int] = {
            "scheme": "sqlite",
            "path": self.path,
            "schema_version": sql.SCHEMA_VERSION,
        }
        for status, count in await self._read(body):
            facts[f"runs.{status}"] = count
        return facts

    # ------------------------------------------------------------------ plumbing

    def _check_open(self) -> None:
        if self._closed:
            raise WorldClosedError(f"{self!r} is closed")

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute(self._busy_pragma)
        if self._max_pages:
            db.execute(f"PRAGMA max_page_count = {self._max_pages}")
        retrying(lambda: db.execute("PRAGMA journal_mode = WAL"))
        db.execute("PRAGMA synchronous = NORMAL")
        transact(db, sql.apply_schema, blocking=True)
        if self.path != ":memory:":
            db.execute(f"PRAGMA wal_autocheckpoint = {_BACKSTOP_PAGES}")
        if self._inline:
            db.execute("PRAGMA busy_timeout = 0")

    def _open(self) -> sqlite3.Connection:
        """Create the file's directory and open the file (blocking)."""
        if self.path != ":memory:":
            directory = os.path.dirname(self.path)
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise WorldMisconfiguredError(
                    f"cannot create the directory {directory!r} of the SQLite world: "
                    f"{exc.strerror or exc}; choose a writable place in the world URL"
                ) from exc
        try:
            return sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
        except sqlite3.Error as exc:
            raise WorldMisconfiguredError(
                f"cannot open the SQLite world {self.path!r}: {exc}; "
                "choose a writable place in the world URL"
            ) from exc

    async def _connect(self) -> tuple[aiosqlite.Connection, sqlite3.Connection]:
        self._check_open()
        if self._connecting is None:
            self._connecting = anyio.Lock()
        async with self._connecting:
            self._check_open()
            if self._conn is None or self._db is None:
                if not self._create and not os.path.exists(self.path):
                    raise WorldMisconfiguredError(f"no SQLite world at {self.path}: no such file")
                # Opened here, not by aiosqlite's thread: a connector failing
                # there reports to the event loop from that thread, which
                # prints a second traceback once the loop has closed.
                db = await anyio.to_thread.run_sync(self._open)
                conn = await connection(lambda: db)
                try:
                    await execute(conn, functools.partial(self._prepare, db))
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await conn.close()
                    raise
                self._conn, self._db = conn, db
                if self.path != ":memory:":
                    self._checkpointer = Checkpointer(self.path)
            return self._conn, self._db

    async def _run(self, function: Callable[[sqlite3.Connection, bool], T]) -> T:
        """Run ``function(db, blocking)``: inline if it need not wait, else on the thread.

        Inline, the connection's busy timeout is zero and ``function`` raises
        ``WouldBlockError`` where it would have to wait for a lock; it then
        runs again, blocking, on aiosqlite's thread.
        """
        conn, db = self._conn, self._db
        if conn is None or db is None:
            conn, db = await self._connect()
        guard = self._guard
        if self._inline and guard.acquire(blocking=False):
            try:
                return function(db, False)
            except WouldBlockError:
                pass
            finally:
                guard.release()

        def blocking() -> T:
            with guard:
                if not self._inline:
                    return function(db, True)
                db.execute(self._busy_pragma)
                try:
                    return function(db, True)
                finally:
                    db.execute("PRAGMA busy_timeout = 0")

        return await execute(conn, blocking)

    async def _write(self, body: Callable[[Writer], T]) -> T:
        """Run ``body`` as one transaction; deliver its signals once it committed."""

        def transaction(db: sqlite3.Connection) -> tuple[T, set[str]]:
            writer = Writer(db)
            try:
                return body(writer), writer.signals
            except RollbackError as rollback:
                raise RollbackError((rollback.result, set())) from None

        result, signals = await self._run(
            lambda db, blocking: transact(db, transaction, blocking=blocking)
        )
        for topic in signals:
            self._hub.signal(topic)
        self._writes += 1
        if self._writes % _CHECKPOINT_EVERY == 0 and self._checkpointer is not None:
            self._checkpointer.request()
        return result

    async def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        return await self._run(lambda db, blocking: run_once(lambda: body(db), blocking))

    # ------------------------------------------------------------------ runs

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run`` and ``StartPolicy`` (a takeover of the policy's key)."""
        self._check_open()
        requests.check_create(request)
        attributes = dict(request.attributes)
        ivalues = {key: index_value(value) for key, value in attributes.items()}

        def body(tx: Writer) -> CreateRunResult:
            db, run_id = tx.db, request.run_id
            try:
                db.execute(
                    sql.INSERT_RUN, (run_id, request.workflow, tx.now_us, sql.encode(attributes))
                )
            except sqlite3.IntegrityError:
                raise requests.run_exists(run_id) from None
            superseded = None
            for key in sorted(request.unique):
                value, claim = attributes[key], (key, ivalues[key])
                encoded = sql.encode(value)
                if db.execute(sql.CLAIM_IF_FREE, (*claim, encoded, run_id)).rowcount:
                    continue
                holder_id, generation = db.execute(sql.GET_CLAIM, claim).fetchone()[:2]
                # a held claim's run exists: pruning a run releases its claims
                status = sql.run_from_row(db.execute(sql.GET_RUN, (holder_id,)).fetchone()).status
                held = (holder_id, generation)
                taken = claims.on_create(request.policy, key, value, held, status, run_id)
                if isinstance(taken, ClaimConflict):
                    raise RollbackError(CreateRunResult(conflict=taken))
                if taken.cancel_reason is not None:
                    tx.cancel(holder_id, taken.cancel_reason)
                    superseded = holder_id
                params = (*claim, encoded, run_id, taken.generation, None, None)
                db.execute(sql.PUT_CLAIM, params)
            if ivalues:
                db.executemany(
                    sql.UPSERT_ATTRIBUTE, [(run_id, key, iv) for key, iv in ivalues.items()]
                )
            stored = runs.created_event(request.workflow, request.args, attributes, tx.now)
            tx.rows.append((run_id, 1, "run_created", sql.encode(stored)))
            tx.flush_events()
            item = (run_id, workflow_item_id(run_id), "workflow", request.workflow, 0, 1)
            db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, b"", tx.now_us, None, 0, None, 0))
            tx.signals.add(WORK_TOPIC)
            run = runs.new_run(run_id, request.workflow, attributes, tx.now)
            deadline = runs.deadline_item(request)
            if deadline is not None:
                tx.enqueue(run, deadline, "", 0.0)
            return CreateRunResult(run=run, superseded_run_id=superseded)

        return await self._write(body)

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        self._check_open()
        lease = request.lease
        lease_key = (
            (None, None, None) if lease is None else (lease.id, request.worker_id, lease.token)
        )

        def body(tx: Writer) -> CommitResult:
            db = tx.db
            row = db.execute(sql.GET_RUN_FOR_COMMIT, (request.run_id, *lease_key)).fetchone()
            if row is None:
                raise LookupError(f"unknown run {request.run_id}")
            run, attributes = sql.run_from_row(row), row[7]
            if run.status.is_closed:
                if request.discard is None:
                    return commits.closed(run.status)
                run, stored = tx.stamp(run, request.discard)
                tx.save_run(run, attributes)
                return commits.closed(run.status, stored)
            held_kind, rewake = row[10], row[11]
            if lease is not None and (held_kind is None or lease.run_id != run.id):
                discard = request.discard
                if discard is None:
                    return commits.lost(run.status)
                logged = db.execute(sql.READ_EVENTS, (run.id, 0)).fetchall()
                if settled((sql.decode_event(d) for (d,) in logged), discard.step, discard.attempt):
                    return commits.lost(run.status)
                run, stored = tx.stamp(run, discard)
                tx.save_run(run, attributes)
                return commits.lost(run.status, stored)
            held = None if lease is None else (held_kind, bool(rewake))
            done = tx.commit(commits.commit_flow(run, request, tx.now, held), request)
            if done.attributes:
                rows = [(run.id, key, index_value(v)) for key, v in done.attributes.items()]
                db.executemany(sql.UPSERT_ATTRIBUTE, rows)
                attributes = sql.encode(done.run.attributes)
            tx.save_run(done.run, attributes)
            return done.result

        return await self._write(body)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run``."""
        self._check_open()
        return await self._write(lambda tx: tx.cancel(run_id, reason))

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        self._check_open()
        return await self._write(lambda tx: tx.request_cancel(run_id, reason, grace_seconds))

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``.

        Items due at the same instant are leased in (run id, item id) order.
        """
        self._check_open()
        wanted = sorted(set(names))
        if limit <= 0 or not wanted:
            return []
        free_sql, expired_sql = sql.due_work_sql(len(wanted))

        def due(db: sqlite3.Connection, now_us: int) -> list[Any]:
            params = (now_us, *wanted, limit)
            rows = db.execute(free_sql, params).fetchall()
            rows += db.execute(expired_sql, params).fetchall()
            rows.sort(key=lambda row: (row[7], row[0], row[1]))
            return rows[:limit]

        def body(tx: Writer) -> list[WorkItem]:
            rows = due(tx.db, tx.now_us)
            expires = sql.to_micros(lease_deadline(tx.now, lease_seconds))
            updates: list[tuple[object, ...]] = []
            items: list[WorkItem] = []
            started: dict[str, list[StepStarted]] = {}
            for run_id, item_id, kind, name, number, attempt, payload, available, ever in rows:
                if kind == "step" and ever:
                    attempt += 1
                token = new_token()
                updates.append((available, worker_id, token, expires, attempt, run_id, item_id))
                row = (kind, name, number, attempt, payload)
                items.append(leased(run_id, item_id, row, token, expires))
                if kind == "step":
                    started.setdefault(run_id, []).append(StepStarted(step=number, attempt=attempt))
            tx.db.executemany(sql.LEASE_WORK, updates)
            for run_id, events in started.items():
                (last_seq,) = tx.db.execute(sql.BUMP_LAST_SEQ, (len(events), run_id)).fetchone()
                tx.stamp_new(run_id, last_seq - len(events), events)
            tx.flush_events()
            return items

        def run(db: sqlite3.Connection, blocking: bool) -> bool:
            return bool(run_once(lambda: due(db, sql.to_micros(utcnow())), blocking))

        # Look before taking the write lock: idle workers polling an empty queue
        # must not serialize every other process behind them.
        if not await self._run(run):
            return []
        return await self._write(body)

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        self._check_open()
        if not items:
            return []

        def body(tx: Writer) -> list[bool]:
            expires = sql.to_micros(lease_deadline(tx.now, lease_seconds))
            return [
                tx.db.execute(
                    sql.RENEW_WORK, (expires, item.run_id, item.id, worker_id, item.token)
                ).rowcount
                == 1
                for item in items
            ]

        return await self._write(body)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        self._check_open()
        rows = [(item.run_id, item.id, worker_id, item.token) for item in items]

        def body(tx: Writer) -> None:
            if rows:
                tx.db.executemany(sql.RELEASE_WORK, rows)
            tx.signals.add(WORK_TOPIC)

        await self._write(body)

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``.

        Signals from any world object on the same file in this process wake
        the caller at once (or make the next ``wait`` return at once when
        nobody was waiting); changes made by other processes are noticed by
        returning after at most the ``poll`` interval, so callers re-check.
        """
        self._check_open()
        await self._hub.wait(topic, min(timeout, self.poll_interval))

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``World.get_run``."""
        self._check_open()

        def body(db: sqlite3.Connection) -> RunRecord | None:
            row = db.execute(sql.GET_RUN, (run_id,)).fetchone()
            return None if row is None else sql.run_from_row(row)

        return await self._read(body)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``."""
        self._check_open()

        def body(db: sqlite3.Connection) -> list[EventKind]:
            rows = db.execute(sql.READ_EVENTS, (run_id, after_seq)).fetchall()
            return [sql.decode_event(data) for (data,) in rows]

        return await self._read(body)

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``."""
        self._check_open()
        if query.limit < 1:
            raise ValueError(f"limit must be at least 1, not {query.limit}")
        before = decode_cursor(query.cursor) if query.cursor else None
        statement, params = sql.list_runs_sql(query, before)

        def body(db: sqlite3.Connection) -> list[RunRecord]:
            return [sql.run_from_row(row) for row in db.execute(statement, params)]

        found = await self._read(body)
        page = tuple(found[: query.limit])
        more = len(found) > query.limit
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        self._check_open()
        params = (key, index_value(value))

        def body(db: sqlite3.Connection) -> Claim | None:
            row = db.execute(sql.GET_CLAIM, params).fetchone()
            if row is None or row[0] is None:  # never claimed, or released
                return None
            run_id, generation, step, attempt, stored = row
            return Claim(
                key=key,
                value=sql.decode_value(stored),
                run_id=run_id,
                generation=generation,
                step=step,
                attempt=attempt,
            )

        return await self._read(body)

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``."""
        self._check_open()

        def body(tx: Writer) -> str | None:
            if resume_id is not None:
                seen = tx.db.execute(sql.GET_RESUME, (token, resume_id)).fetchone()
                if seen is not None:
                    return str(seen[0])
            found = tx.db.execute(sql.GET_HOOK, (token,)).fetchone()
            if found is None:
                return None
            run_id, number = found
            if resume_id is not None:
                tx.db.execute(sql.INSERT_RESUME, (token, resume_id, run_id))
            row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
            run = sql.run_from_row(row)
            received = HookReceived(
                hook=number, payload=payload, resume_id=resume_id, token="" if number else token
            )
            run, _ = tx.stamp(run, received)
            run, _ = tx.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
            tx.save_run(run, row[7])
            return str(run_id)

        return await self._write(body)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        self._check_open()

        def body(db: sqlite3.Connection) -> list[HookRecord]:
            if run_id is None:
                rows = db.execute(sql.LIST_HOOKS).fetchall()
            else:
                rows = db.execute(sql.LIST_RUN_HOOKS, (run_id,)).fetchall()
            return [
                HookRecord(
                    token=token,
                    run_id=owner,
                    hook=number,
                    attributes=sql.decode_attributes(attributes),
                    created_at=sql.from_micros(created),
                )
                for token, owner, number, attributes, created in rows
            ]

        return await self._read(body)

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``; pairs with the same key come in value order."""
        self._check_open()

        def body(db: sqlite3.Connection) -> list[Claim]:
            return [
                Claim(
                    key=key,
                    value=sql.decode_value(value),
                    run_id=run_id,
                    generation=generation,
                    step=step,
                    attempt=attempt,
                )
                for key, value, generation, step, attempt in db.execute(sql.RUN_CLAIMS, (run_id,))
            ]

        return await self._read(body)

    # ------------------------------------------------------------------ retention

    async def prune_runs(self, closed_before: datetime, limit: int = 1000) -> list[str]:
        """See ``World.prune_runs``; the runs that closed first go first."""
        self._check_open()
        if limit <= 0:
            return []
        params = (sql.to_micros(closed_before), limit)

        def body(tx: Writer) -> list[str]:
            pruned = [run_id for (run_id,) in tx.db.execute(sql.PRUNABLE_RUNS, params)]
            for statement in sql.PRUNE_RUN:
                tx.db.executemany(statement, [(run_id,) for run_id in pruned])
            return pruned

        return await self._write(body)
