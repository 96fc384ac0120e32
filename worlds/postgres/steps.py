"""The PostgreSQL world's transaction steps: a step's writes and its outcome in one transaction.

``open_transaction`` lends a pooled connection for the step and opens a
transaction at the step's isolation (``REPEATABLE READ`` unless it asks for
``SERIALIZABLE`` or ``READ COMMITTED``). Its first statements check the lease
and lock the step's run and item (``transactions.fence``): a renewal or a
takeover of that item waits for the step, and other runs' commits never do.
The function's statements go to the same connection; the outcome is
committed by the transaction-step flow (``worlds._flows.transactions``) over
``PostgresRows`` in the same transaction. A serialization failure or a
deadlock anywhere in it marks the transaction ``conflicted`` and raises
``TransactionConflictError``: the engine runs the function again.

The pool's ``command_timeout`` bounds each statement, the function's too.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from worlds._flows import transactions
from worlds._flows.rows import Retry, Rollback
from worlds.errors import TransactionConflictError
from worlds.postgres.connection import RETRYABLE
from worlds.postgres.rows import PostgresRows
from worlds.protocol import Isolation
from worlds.types import CommitRequest, CommitResult, WorkItem

if TYPE_CHECKING:
    from asyncpg.transaction import Transaction

    from worlds.postgres.connection import Connection, Pool

__all__ = ["PostgresTransaction", "open_transaction"]

T = TypeVar("T")


def _conflict(exc: BaseException) -> TransactionConflictError:
    return TransactionConflictError(
        f"the database undid a transaction step's transaction to resolve a conflict: {exc}"
    )


class PostgresTransaction:
    """An open transaction of a transaction step (``OpenTransaction``)."""

    def __init__(
        self,
        conn: Connection,
        transaction: Transaction,
        clock: Callable[[], datetime],
        committed: Callable[[set[str]], None],
    ) -> None:
        self._conn = conn
        self._transaction = transaction
        self._clock = clock
        self._committed = committed
        self._conflicted = False
        self.done = False
        """Whether the transaction ended (committed, or rolled back by a refused commit)."""

    @property
    def raw(self) -> Connection:
        """The asyncpg connection holding the transaction."""
        return self._conn

    @property
    def conflicted(self) -> bool:
        """Whether a serialization failure or a deadlock undid the transaction."""
        return self._conflicted

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """See ``OpenTransaction.execute`` (``$1`` parameters)."""
        records = await self._guarded(self._conn.fetch(sql, *params))
        return [tuple(record) for record in records]

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``OpenTransaction.commit``."""
        rows = PostgresRows(self._conn, None, self._clock)
        try:
            result: CommitResult = await self._guarded(transactions.commit_step(rows, request))
        except Rollback as rollback:
            await self._transaction.rollback()
            self.done = True
            return cast(CommitResult, rollback.result)
        if result.stale:
            return result
        await self._guarded(self._transaction.commit())
        self.done = True
        self._committed(rows.signals)
        return result

    async def _guarded(self, call: Awaitable[T]) -> T:
        """``call`` awaited; a conflict marks the transaction and is raised as one."""
        try:
            return await call
        except RETRYABLE as exc:
            self._conflicted = True
            raise _conflict(exc) from exc
        except Retry as exc:  # a flow lost a race it can only win in a new transaction
            self._conflicted = True
            raise _conflict(exc) from exc


@contextlib.asynccontextmanager
async def open_transaction(
    connect: Callable[[], Awaitable[Pool]],
    clock: Callable[[], datetime],
    committed: Callable[[set[str]], None],
    lease: WorkItem,
    worker_id: str,
    isolation: Isolation,
) -> AsyncIterator[PostgresTransaction]:
    """See ``World.transaction``. ``committed`` is told the topics to notify once the
    transaction committed."""
    level = transactions.check_isolation(isolation)
    pool = await connect()
    async with pool.acquire() as conn:
        transaction = conn.transaction(isolation=level)
        await transaction.start()
        step = PostgresTransaction(conn, transaction, clock, committed)
        try:
            rows = PostgresRows(conn, None, clock)
            await step._guarded(transactions.fence(rows, lease, worker_id))
            yield step
        finally:
            if not step.done:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    await transaction.rollback()
