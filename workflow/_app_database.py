"""Transaction steps on an application database: the output recorded beside the writes.

``@transaction(database="postgresql://...")`` runs its function in a
transaction of that database, not the world's. The world's log cannot join
that transaction, so the step's encoded result is written in it too, to the
table ``workflow_transaction_outputs`` (created on first use, in the
connection's default schema), keyed by run and step: the writes and the
output commit together. The result is then copied to the world's log like
any step's. A worker that dies in between leaves the output recorded: the
next attempt finds it (``recorded``) and copies it without running the
function again. Two attempts running at once (a zombie and its successor)
cannot both commit: the second's insert of the output meets the first's key
and fails (``TransactionConflictError``), and its next try finds the output.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from worlds.errors import TransactionConflictError
from worlds.protocol import Isolation

__all__ = ["OUTPUTS_TABLE", "AppTransaction", "check_database", "open_app_transaction"]

OUTPUTS_TABLE = "workflow_transaction_outputs"
"""The table of an application database that holds the transaction steps' outputs."""

_CREATE = (
    f"CREATE TABLE IF NOT EXISTS {OUTPUTS_TABLE} ("
    " run_id TEXT NOT NULL, step INTEGER NOT NULL, output BYTEA NOT NULL,"
    " recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (run_id, step))"
)
_RECORDED = f"SELECT output FROM {OUTPUTS_TABLE} WHERE run_id = $1 AND step = $2"
_RECORD = f"INSERT INTO {OUTPUTS_TABLE} (run_id, step, output) VALUES ($1, $2, $3)"

if TYPE_CHECKING:
    import asyncpg


def _conflicts() -> tuple[type[Exception], ...]:
    """The errors that undo a try (asyncpg is an extra: imported only when used)."""
    import asyncpg

    return (
        asyncpg.exceptions.SerializationError,
        asyncpg.exceptions.DeadlockDetectedError,
        asyncpg.exceptions.UniqueViolationError,  # another attempt recorded the output first
    )


_ready: set[str] = set()
"""The databases whose outputs table this process has made sure of."""


def check_database(database: object) -> str:
    """``database`` if it is a PostgreSQL URL, else ``ValueError`` (at the decorator)."""
    if not isinstance(database, str) or not database.lower().startswith(
        ("postgresql://", "postgres://")
    ):
        raise ValueError(
            "database= must be a PostgreSQL URL (postgresql://...), the application database"
            f" a transaction step writes in; got {database!r}"
        )
    return database


def _conflict(exc: BaseException) -> TransactionConflictError:
    return TransactionConflictError(
        f"a transaction step's transaction on its application database conflicted: {exc}"
    )


class AppTransaction:
    """An open transaction of an application database, for one try of a step."""

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn
        self._conflicted = False

    @property
    def raw(self) -> asyncpg.Connection[Any]:
        """The asyncpg connection holding the transaction."""
        return self._conn

    @property
    def conflicted(self) -> bool:
        """Whether a serialization failure, a deadlock or a concurrent record undid it."""
        return self._conflicted

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """One statement (``$1`` parameters); its rows as tuples."""
        try:
            return [tuple(record) for record in await self._conn.fetch(sql, *params)]
        except _conflicts() as exc:
            self._conflicted = True
            raise _conflict(exc) from exc

    async def recorded(self, run_id: str, step: int) -> bytes | None:
        """The output a committed attempt of this step recorded, if one did."""
        found = await self._conn.fetchval(_RECORDED, run_id, step)
        return None if found is None else bytes(found)

    async def record(self, run_id: str, step: int, output: bytes) -> None:
        """Record the step's encoded result in the transaction."""
        try:
            await self._conn.execute(_RECORD, run_id, step, output)
        except _conflicts() as exc:
            self._conflicted = True
            raise _conflict(exc) from exc


@contextlib.asynccontextmanager
async def open_app_transaction(
    database: str, isolation: Isolation, commit_timeout: float = 30.0
) -> AsyncIterator[AppTransaction]:
    """A transaction on ``database`` at ``isolation``: committed when the block ends
    without an exception, else rolled back. ``TransactionConflictError`` when the
    database undid it (try again)."""
    import asyncpg

    conn: asyncpg.Connection[Any] = await asyncpg.connect(database, timeout=commit_timeout)
    try:
        if database not in _ready:
            with contextlib.suppress(
                asyncpg.exceptions.UniqueViolationError, asyncpg.exceptions.DuplicateTableError
            ):  # another process created it at the same moment
                await conn.execute(_CREATE)
            _ready.add(database)
        transaction = conn.transaction(isolation=isolation)
        await transaction.start()
        step = AppTransaction(conn)
        try:
            yield step
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await transaction.rollback()
            raise
        try:
            await transaction.commit()
        except _conflicts() as exc:
            raise _conflict(exc) from exc
    finally:
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await conn.close()
