"""The SQLite world's transaction steps: a step's writes and its outcome in one transaction.

``open_transaction`` takes the file's write lock (``BEGIN IMMEDIATE``) on the
world's step connection (``Connection.step_connection``) for the length of
the step's function: SQLite has one writer at a time, so a transaction step
is serializable, and every other write to the file (this process's and
others') waits until it ends. Keep transaction steps short. The function's
statements run on the event loop (the lock is held: none waits); the outcome
is committed by the transaction-step flow (``worlds._flows.transactions``)
over ``SqliteRows`` in the same transaction, then ``COMMIT`` makes both
durable at once, with one fsync.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
import anyio.to_thread

from worlds._flows import transactions
from worlds._flows.rows import Rollback
from worlds._flows.stepper import run_sync
from worlds.protocol import Isolation
from worlds.sqlite.connection import Connection
from worlds.sqlite.rows import SqliteRows
from worlds.sqlite.transactions import is_busy, retrying
from worlds.types import CommitRequest, CommitResult, WorkItem

__all__ = ["SqliteTransaction", "open_transaction"]


class SqliteTransaction:
    """An open ``BEGIN IMMEDIATE`` transaction of a transaction step (``OpenTransaction``)."""

    def __init__(self, db: sqlite3.Connection, connection: Connection) -> None:
        self._db = db
        self._connection = connection
        self.done = False
        """Whether the transaction ended (committed, or rolled back by a refused commit)."""

    @property
    def raw(self) -> sqlite3.Connection:
        """The ``sqlite3`` connection holding the transaction (rows as ``sqlite3.Row``)."""
        return self._db

    @property
    def conflicted(self) -> bool:
        """Never: SQLite's one writer at a time leaves nothing to conflict with."""
        return False

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """See ``OpenTransaction.execute`` (``?`` parameters)."""
        self._check()
        return [tuple(row) for row in self._db.execute(sql, params).fetchall()]

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``OpenTransaction.commit``."""
        self._check()
        rows = SqliteRows(self._db)
        try:
            result = run_sync(transactions.commit_step(rows, request))
            rows.finish()
        except Rollback as rollback:
            self._db.execute("ROLLBACK")
            self.done = True
            return cast(CommitResult, rollback.result)
        if result.stale:
            return result
        self._connection.check_file()  # nothing lands in a file nobody can open again
        self._db.execute("COMMIT")
        self.done = True
        self._connection.committed(rows.signals)
        return result

    def _check(self) -> None:
        if self.done or not self._db.in_transaction:
            raise RuntimeError("the transaction step's transaction has ended")


@contextlib.asynccontextmanager
async def open_transaction(
    connection: Connection, lease: WorkItem, worker_id: str, isolation: Isolation
) -> AsyncIterator[SqliteTransaction]:
    """See ``World.transaction``: the file's write lock for the block, rolled back
    unless the step's commit committed it. ``isolation`` is checked, not used:
    SQLite's one writer makes every transaction serializable."""
    transactions.check_isolation(isolation)
    async with connection.step_connection() as db:
        await _begin(db, connection.busy_timeout)
        try:
            run_sync(transactions.fence(SqliteRows(db), lease, worker_id))
            yield SqliteTransaction(db, connection)
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")


async def _begin(db: sqlite3.Connection, busy_timeout: float) -> None:
    """``BEGIN IMMEDIATE`` on ``db``: at once if the lock is free, else waiting for it
    in a thread (another writer holds it)."""
    try:
        db.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as exc:
        if not is_busy(exc):
            raise

    def wait() -> None:
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        try:
            retrying(lambda: db.execute("BEGIN IMMEDIATE"))
        finally:
            db.execute("PRAGMA busy_timeout = 0")

    with anyio.CancelScope(shield=True):  # the lock, once taken, is released below
        await anyio.to_thread.run_sync(wait)
