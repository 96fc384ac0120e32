"""The SQLite world's connection: opening the file, and where each operation runs.

``Connection`` owns one aiosqlite connection, opened on first use. A whole
operation (its transaction included) is one function over that connection,
and operations of one world object never interleave. The function runs
inline on the event loop when it cannot block: the connection is idle and
SQLite grants the write lock at once. Otherwise it runs on aiosqlite's
thread, where it may wait for the lock: one thread hop per operation,
however many statements it takes. ``Checkpointer`` copies the WAL back from
a thread and connection of its own, so no commit pays for a checkpoint.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, unquote

import aiosqlite
import anyio
import anyio.to_thread

from worlds._flows.rows import Rollback
from worlds._lifecycle import WorldClosedError
from worlds._signals import SignalHub
from worlds.errors import (
    TransactionsUnsupportedError,
    WorldFileReplacedError,
    WorldMisconfiguredError,
    as_world_error,
)
from worlds.sqlite.rows import SqliteRows
from worlds.sqlite.schema import apply_schema
from worlds.sqlite.transactions import WouldBlockError, retrying, run_once, transact

__all__ = ["SYNCHRONOUS", "Checkpointer", "Connection", "parse_url"]

T = TypeVar("T")

_CHECKPOINT_EVERY = 64
"""Write transactions between two background checkpoints."""
_BACKSTOP_PAGES = 10_000
"""WAL pages after which a writer checkpoints itself (the background one fell behind)."""


SYNCHRONOUS = {"full": 2.0, "normal": 1.0}
"""The values of the ``synchronous`` URL option, as SQLite numbers them."""


def parse_url(url: str) -> tuple[str, dict[str, float]]:
    """The absolute path (or ``:memory:``) and the options of an SQLite world URL.

    ``synchronous`` (``full``, the default, or ``normal``) becomes its SQLite
    number (2 or 1); every other option is a number.

    Raises:
        ValueError: ``url`` is not an SQLite world URL, has no path, or an
            unknown, non-numeric or negative option, or a ``synchronous``
            other than ``full`` and ``normal``.
    """
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
    options = {
        "poll": 0.05,
        "busy_timeout": 10.0,
        "inline": 1.0,
        "max_pages": 0.0,
        "synchronous": SYNCHRONOUS["full"],
    }
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in options:
            raise ValueError(f"unknown option {name!r} in {url!r}; known: {sorted(options)}")
        if name == "synchronous":
            if value.lower() not in SYNCHRONOUS:
                raise ValueError(
                    f"option 'synchronous' in {url!r} must be 'full' (the default: an"
                    " acknowledged commit survives power loss) or 'normal' (faster; a"
                    f" power loss may roll back the last commits), not {value!r}"
                )
            options[name] = SYNCHRONOUS[value.lower()]
            continue
        try:
            options[name] = float(value)
        except ValueError:
            raise ValueError(f"option {name!r} in {url!r} must be a number") from None
        if options[name] < 0:
            raise ValueError(f"option {name!r} in {url!r} must not be negative")
    if path != ":memory:":
        path = os.path.abspath(path)
    return path, options


_in_step: contextvars.ContextVar[bool] = contextvars.ContextVar("sqlite_in_step", default=False)
"""True in the code a transaction step runs while it holds its world's write lock."""

_HUBS: dict[str, SignalHub] = {}
_HUBS_LOCK = threading.Lock()


def _hub_for(path: str) -> SignalHub:
    """The hub every world object on ``path`` in this process shares."""
    if path == ":memory:":
        return SignalHub()
    with _HUBS_LOCK:
        return _HUBS.setdefault(path, SignalHub())


class Connection:
    """One world object's connection to its file, and the runner of its operations.

    Args:
        path: the absolute path of the file, or ``:memory:``.
        options: the URL's options, as ``parse_url`` returns them.
        create: ``False``: the file must exist when it is first opened.
        describe: the world's ``repr``, for the error a closed world raises.
    """

    def __init__(
        self, path: str, options: dict[str, float], *, create: bool, describe: str
    ) -> None:
        self.path = path
        self._describe = describe
        self._create = create
        self._busy_pragma = f"PRAGMA busy_timeout = {int(options['busy_timeout'] * 1000)}"
        self._inline = bool(options["inline"])
        self._max_pages = int(options["max_pages"])
        self.synchronous = next(
            name for name, level in SYNCHRONOUS.items() if level == options["synchronous"]
        )
        self._guard = threading.Lock()
        self._conn: aiosqlite.Connection | None = None
        self._checkpointer: Checkpointer | None = None
        self._writes = 0
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None  # (device, inode) of the open file
        self._connecting: anyio.Lock | None = None
        self._closed = False
        self.hub = _hub_for(path)
        self._queue: list[_Write] = []
        self.busy_timeout = options["busy_timeout"]
        self._step_db: sqlite3.Connection | None = None
        self._writer: anyio.Semaphore | None = None
        """Held by a write batch or a transaction step: one at a time in this world
        object (made on first use, on the event loop that uses it)."""
        self.batches = 0
        """Transactions that carried more than one write (group commit)."""

    def check_open(self) -> None:
        """Raise ``WorldClosedError`` once the world was closed."""
        if self._closed:
            raise WorldClosedError(f"{self._describe} is closed")

    def reopen(self) -> None:
        """Accept operations again after ``close``; the file opens on the next one."""
        self._closed = False

    async def close(self) -> None:
        """Close the connection and stop the checkpointer; wake every waiter."""
        self._closed = True
        self._writer = None  # a world opened again may run on another event loop
        self.hub.wake_all()
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
        self._db = None
        step_db, self._step_db = self._step_db, None
        if step_db is not None:
            step_db.close()
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            await anyio.to_thread.run_sync(checkpointer.stop().join)

    def _prepare(self, db: sqlite3.Connection) -> None:
        db.execute(self._busy_pragma)
        if self._max_pages:
            db.execute(f"PRAGMA max_page_count = {self._max_pages}")
        retrying(lambda: db.execute("PRAGMA journal_mode = WAL"))
        db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
        transact(db, apply_schema, blocking=True)
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
            db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
        except sqlite3.Error as exc:
            raise WorldMisconfiguredError(
                f"cannot open the SQLite world {self.path!r}: {exc}; "
                "choose a writable place in the world URL"
            ) from exc
        db.row_factory = sqlite3.Row  # rows are read by column name
        if self.path != ":memory:":
            # the file just opened: later, the path must still lead to it
            found = os.stat(self.path)
            self._identity = (found.st_dev, found.st_ino)
        return db

    def check_file(self) -> None:
        """Raise ``WorldFileReplacedError`` unless the path still leads to the open file.

        Deleted or replaced under an open connection, the old file lives on for
        this process alone: whatever is written to it is lost when the process
        ends. Checked before every read and before every commit (under the write lock).
        """
        if self._identity is None:
            return
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            raise WorldFileReplacedError(
                f"the SQLite world's file {self.path} was deleted while the world had it"
                " open; nothing more is written to it: restore the file, or open the world"
                " again to start a new one"
            ) from None
        except OSError:
            return  # cannot tell (a permission changed): the operation itself will say
        if (found.st_dev, found.st_ino) != self._identity:
            raise WorldFileReplacedError(
                f"the SQLite world's file {self.path} was replaced by another file while"
                " the world had it open; nothing more is written to the old one: open the"
                " world again to use the file now at that path"
            )

    async def connect(self) -> tuple[aiosqlite.Connection, sqlite3.Connection]:
        """Open the file (creating or migrating its schema) unless it is open already."""
        self.check_open()
        if self._connecting is None:
            self._connecting = anyio.Lock()
        async with self._connecting:
            self.check_open()
            if self._conn is None or self._db is None:
                if not self._create and not os.path.exists(self.path):
                    raise WorldMisconfiguredError(f"no SQLite world at {self.path}: no such file")
                # Opened here, not by aiosqlite's thread: a connector failing
                # there reports to the event loop from that thread, which
                # prints a second traceback once the loop has closed.
                db = await anyio.to_thread.run_sync(self._open)
                conn = await _daemon_connection(lambda: db)
                try:
                    await _execute(conn, functools.partial(self._prepare, db))
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await conn.close()
                    raise
                self._conn, self._db = conn, db
                if self.path != ":memory:":
                    self._checkpointer = Checkpointer(self.path)
            return self._conn, self._db

    async def run(
        self, function: Callable[[sqlite3.Connection, bool], T], *, check: bool = True
    ) -> T:
        """Run ``function(db, blocking)``: inline if it need not wait, else on the thread.

        Inline, the connection's busy timeout is zero and ``function`` raises
        ``WouldBlockError`` where it would have to wait for a lock; it then
        runs again, blocking, on aiosqlite's thread. ``check=False``: the file
        is not checked first (a write checks it before it commits).
        """
        conn, db = self._conn, self._db
        if conn is None or db is None:
            conn, db = await self.connect()
        if check:
            self.check_file()
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
                waited = _wait_finely(lambda: function(db, False), self.busy_timeout)
                if waited is not _STILL_LOCKED:
                    return waited
                db.execute(self._busy_pragma)
                try:
                    return function(db, True)
                finally:
                    db.execute("PRAGMA busy_timeout = 0")

        return await _execute(conn, blocking)

    async def write(self, body: Callable[[SqliteRows], T]) -> T:
        """Run ``body`` as one transaction; deliver its signals once it committed.

        Group commit: the writes of one loop turn share one transaction (one
        fsync), each in a savepoint of its own. A body that raises (or rolls
        back) undoes only its own savepoint and its caller alone gets the
        outcome; a world failure fails the whole batch. Nobody's write returns
        before the transaction holding it has committed.
        """
        if _in_step.get():
            raise RuntimeError(
                "a @transaction function cannot write to its world through the world's"
                " operations (set_attribute, write_stream, start, ...) while its"
                " transaction is open: write with get_transaction().execute, or do it"
                " in a @step"
            )
        entry = _Write(body)
        self._queue.append(entry)
        if len(self._queue) > 1:  # the leader of this turn writes it
            await entry.settled()
            return cast(T, entry.outcome())
        with anyio.CancelScope(shield=True):  # the batch's other callers wait on it
            await anyio.sleep(0)  # let the other writes ready this turn join
            batch, self._queue = self._queue, []
            await self._write_batch(batch)
        return cast(T, entry.outcome())

    async def _write_batch(self, batch: list[_Write]) -> None:
        """Run the bodies of ``batch`` in one transaction and settle each entry."""
        if len(batch) == 1:

            def transaction(db: sqlite3.Connection) -> tuple[list[_Outcome], set[str]]:
                writer = SqliteRows(db)
                try:
                    result = batch[0].body(writer)
                    writer.finish()
                    return [(True, result)], writer.signals
                except Rollback as rollback:
                    raise Rollback(([(True, rollback.result)], set())) from None

        else:

            def transaction(db: sqlite3.Connection) -> tuple[list[_Outcome], set[str]]:
                return _in_savepoints(db, batch)

        try:
            # A transaction step holds the file's lock on the step connection while
            # its function runs: this world object's writes wait for it here, on the
            # event loop, not in the thread its reads need too.
            writer = self.writer()
            try:
                writer.acquire_nowait()
            except anyio.WouldBlock:
                await writer.acquire()
            try:
                outcomes, signals = await self.run(
                    lambda db, blocking: transact(
                        db, transaction, blocking=blocking, before_commit=self.check_file
                    ),
                    check=False,  # checked once, before the commit: nothing lands in a lost file
                )
            finally:
                writer.release()
        except BaseException as exc:
            for entry in batch:
                entry.settle((False, exc))
            if not isinstance(exc, Exception):
                raise
            return
        for entry, outcome in zip(batch, outcomes, strict=True):
            entry.settle(outcome)
        self.batches += len(batch) > 1
        self.committed(signals)

    def writer(self) -> anyio.Semaphore:
        """The lock a write batch or a transaction step of this world object holds."""
        if self._writer is None:
            # a semaphore of one: a lock that does not look up its task twice per write
            self._writer = anyio.Semaphore(1)
        return self._writer

    def committed(self, signals: set[str]) -> None:
        """After a write transaction committed: signal its topics, checkpoint now and then."""
        for topic in signals:
            self.hub.signal(topic)
        self._writes += 1
        if self._writes % _CHECKPOINT_EVERY == 0 and self._checkpointer is not None:
            self._checkpointer.request()

    @contextlib.asynccontextmanager
    async def step_connection(self) -> AsyncIterator[sqlite3.Connection]:
        """The connection transaction steps write on, for one step at a time in this
        world object (the others wait their turn here, not on the file's lock).

        A second connection to the file, not the world's own: while a step's
        transaction holds the file's write lock, this world object's reads go on
        (WAL readers never wait) and its writes wait for the step (``_writer``).
        A write of this world object from inside the step's function would wait
        for the step itself: it is refused (``RuntimeError``).

        Raises:
            TransactionsUnsupportedError: the world is ``:memory:``, which a
                second connection cannot reach.
        """
        await self.connect()  # the schema is in place
        if self.path == ":memory:":
            raise TransactionsUnsupportedError(
                "an in-memory SQLite world (sqlite:///:memory:) cannot run @transaction"
                " steps: use an SQLite file (sqlite:///app.db) or PostgreSQL"
            )
        async with self.writer():
            self.check_open()
            if self._step_db is None:
                self._step_db = await anyio.to_thread.run_sync(self._open_step_connection)
            token = _in_step.set(True)
            try:
                yield self._step_db
            finally:
                _in_step.reset(token)

    def _open_step_connection(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, cached_statements=256
        )
        db.row_factory = sqlite3.Row  # the commit's rows are read by column name
        db.execute("PRAGMA busy_timeout = 0")  # waits for the lock happen off the loop
        db.execute(f"PRAGMA synchronous = {self.synchronous.upper()}")
        return db

    async def read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` outside any write transaction, retrying while the file is locked."""
        return await self.run(lambda db, blocking: run_once(lambda: body(db), blocking))


_FINE_WAIT = 0.05
"""Seconds a write that met another process's lock tries again every ``_FINE_POLL``
before it leaves the waiting to SQLite's busy handler."""
_FINE_POLL = 0.001
_STILL_LOCKED: Any = object()


def _wait_finely(attempt: Callable[[], T], busy_timeout: float) -> T:
    """``attempt()`` (one that raises ``WouldBlockError`` where it would wait), tried
    again every ``_FINE_POLL`` seconds for up to ``_FINE_WAIT``; ``_STILL_LOCKED``
    if the lock stayed taken.

    SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20 ms ... between its tries, so a
    commit that meets another process's transaction of 3 ms waits 8 ms, and one of
    10 ms waits 18: under a bulk action's steady short transactions the poll
    doubled what each collision cost (RFC 0023). A try costs microseconds
    (``BEGIN IMMEDIATE`` refused at once), so the first ``_FINE_WAIT`` seconds are
    polled at an even ``_FINE_POLL`` here and a waiter starts within about a
    millisecond of the lock's release.
    """
    deadline = time.monotonic() + min(_FINE_WAIT, busy_timeout)
    while True:
        try:
            return attempt()
        except WouldBlockError:
            if time.monotonic() >= deadline:
                return cast(T, _STILL_LOCKED)
        time.sleep(_FINE_POLL)


_Outcome = tuple[bool, object]
"""A write's outcome: ``(True, result)`` or ``(False, exception)``."""


class _Write:
    """One caller's write body waiting for its batch, and its outcome."""

    def __init__(self, body: Callable[[SqliteRows], object]) -> None:
        self.body = body
        self._done: anyio.Event | None = None  # made by a caller that waits: not the leader
        self._outcome: _Outcome | None = None

    def settle(self, outcome: _Outcome) -> None:
        self._outcome = outcome
        if self._done is not None:
            self._done.set()

    async def settled(self) -> None:
        """Wait until the leader settled this write."""
        if self._outcome is None:
            self._done = anyio.Event()
            await self._done.wait()

    def outcome(self) -> object:
        assert self._outcome is not None, "read only once settled"
        ok, value = self._outcome
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        return value


def _in_savepoints(db: sqlite3.Connection, batch: list[_Write]) -> tuple[list[_Outcome], set[str]]:
    """Run each body of ``batch`` in a savepoint of the open transaction: a body
    that raises or rolls back undoes only itself. A world failure, or a lock that
    must be waited for, is raised for the whole batch."""
    outcomes: list[_Outcome] = []
    signals: set[str] = set()
    for entry in batch:
        writer = SqliteRows(db)
        db.execute("SAVEPOINT write")
        try:
            result = entry.body(writer)
            writer.finish()
            outcomes.append((True, result))
        except Rollback as rollback:
            db.execute("ROLLBACK TO write")
            outcomes.append((True, rollback.result))
        except Exception as exc:
            if isinstance(exc, WouldBlockError) or as_world_error(exc) is not None:
                raise
            db.execute("ROLLBACK TO write")
            outcomes.append((False, exc))
        else:
            signals |= writer.signals
        db.execute("RELEASE write")
    return outcomes, signals


async def _execute(conn: aiosqlite.Connection, function: Callable[[], T]) -> T:
    """Run ``function`` on the connection's thread, queued behind its other work."""
    # aiosqlite's own queue: one thread hop for a whole operation, where its
    # public API takes one per statement.
    execute = cast(Callable[[Callable[[], T]], Awaitable[T]], conn._execute)
    return await execute(function)


def _daemon_connection(connector: Callable[[], sqlite3.Connection]) -> aiosqlite.Connection:
    """An aiosqlite connection whose thread does not keep the process alive.

    aiosqlite's thread is not a daemon: a world nobody closed would make the
    interpreter wait for it forever at exit. Every transaction is atomic, so a
    process that exits mid-operation loses nothing committed.
    """
    conn = aiosqlite.Connection(connector, iter_chunk_size=64)
    conn._thread.daemon = True  # set before aiosqlite starts the thread
    return conn


class Checkpointer:
    """Copies the WAL back into the database from its own thread and connection.

    Checkpoints done by the committing connection stall its commit for
    milliseconds; a passive checkpoint elsewhere runs beside the writers.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._wanted = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Ask for a checkpoint soon; requests made meanwhile merge into one."""
        self._wanted.set()

    def stop(self) -> threading.Thread:
        """Stop after the current checkpoint; the thread to join."""
        self._stopping = True
        self._wanted.set()
        return self._thread

    def _serve(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            while True:
                self._wanted.wait()
                self._wanted.clear()
                if self._stopping:
                    return
                # Best effort: the writers' own autocheckpoint is the backstop.
                with contextlib.suppress(sqlite3.Error):
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()
