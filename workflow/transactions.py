"""``@transaction``: steps whose database writes and recorded result commit together.

::

    @transaction
    async def debit(account: str, amount: int) -> int:
        tx = get_transaction()
        await tx.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?",
                         amount, account)
        rows = await tx.execute("SELECT balance FROM accounts WHERE id = ?", account)
        return rows[0][0]

Called from workflow code like a step, a transaction step runs its function
inside a write transaction of the world's own database (the SQLite file, the
PostgreSQL database): when it returns, its writes and its recorded result
commit in that one transaction, fenced by the step's lease, so however often
workers die the writes happen exactly once. When it raises, both are rolled
back and the step is retried like any other. Statements use the database's
own parameter style (``?`` on SQLite, ``$1`` on PostgreSQL). The memory world
refuses transaction steps.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, ParamSpec, Protocol, TypeVar, overload

from workflow._app_database import check_database
from workflow.decorators import RetryPolicy, StepDefinition, step
from workflow.errors import NotInWorkflowError
from worlds.protocol import Isolation
from worlds.quoting import quoted
from worlds.semantics import check_isolation

__all__ = [
    "Statements",
    "Transaction",
    "TransactionDecorator",
    "TransactionDefinition",
    "get_transaction",
    "transaction",
    "using",
]

P = ParamSpec("P")
R = TypeVar("R")


class Statements(Protocol):
    """What a transaction step's open transaction offers its function."""

    @property
    def raw(self) -> Any:
        """The driver's connection."""
        ...

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """One statement; its rows."""
        ...


class Transaction:
    """The database transaction a running ``@transaction`` function writes in."""

    def __init__(self, inner: Statements, isolation: Isolation) -> None:
        self._inner = inner
        self.isolation = isolation
        """The isolation asked for (SQLite has one: its single writer is serializable)."""

    @property
    def raw(self) -> Any:
        """The driver's connection the transaction is open on: an ``sqlite3.Connection``
        (its rows are ``sqlite3.Row``) or an asyncpg connection. Statements on it
        are part of the transaction; do not commit or roll back on it."""
        return self._inner.raw

    async def execute(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Run one statement in the transaction; the rows it returns, as tuples.

        Parameters go in the database's own style: ``?`` on SQLite, ``$1``,
        ``$2`` ... on PostgreSQL.
        """
        return await self._inner.execute(sql, *params)

    def __repr__(self) -> str:
        return f"<Transaction {self.isolation} on {type(self.raw).__name__}>"


class TransactionDefinition(StepDefinition[P, R]):
    """A function decorated with ``@transaction``; await it from a workflow."""

    def __init__(
        self,
        fn: Callable[P, Any],
        name: str,
        retry: RetryPolicy,
        timeout: float | None,
        isolation: Isolation,
        database: str | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@transaction needs an async def function, got {quoted(fn)}")
        super().__init__(fn, name, retry, timeout)
        self.isolation = isolation
        self.database = database
        """The application database's URL, or ``None``: the world's own database."""

    def __repr__(self) -> str:
        return f"<transaction {self.name}>"


class TransactionDecorator(Protocol):
    """What ``@transaction(...)`` with options returns."""

    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> TransactionDefinition[P, R]:
        """Decorate ``fn``."""
        ...


@overload
def transaction(fn: Callable[P, Coroutine[Any, Any, R]], /) -> TransactionDefinition[P, R]: ...
@overload
def transaction(
    *,
    name: str | None = None,
    isolation: Isolation = "repeatable_read",
    database: str | None = None,
    max_retries: int = 3,
    retry_delay: float = 1.0,
    backoff: float = 2.0,
    max_delay: float = 60.0,
    timeout: float | None = None,
) -> TransactionDecorator: ...


def transaction(
    fn: Callable[P, Coroutine[Any, Any, R]] | None = None,
    /,
    *,
    name: str | None = None,
    isolation: Isolation = "repeatable_read",
    database: str | None = None,
    max_retries: int = 3,
    retry_delay: float = 1.0,
    backoff: float = 2.0,
    max_delay: float = 60.0,
    timeout: float | None = None,
) -> TransactionDefinition[P, R] | TransactionDecorator:
    """Mark an ``async def`` as a transaction step: ``@transaction`` or
    ``@transaction(isolation="serializable", ...)``.

    Inside it, ``get_transaction()`` is the open transaction. Its writes and
    its result commit together, exactly once; an exception rolls both back
    and the attempt is retried as ``@step`` retries (``max_retries``,
    ``retry_delay``, ``backoff``, ``max_delay``, ``timeout`` mean the same).

    ``isolation`` (PostgreSQL): ``"repeatable_read"`` (the default),
    ``"serializable"`` or ``"read_committed"``. A serialization failure or a
    deadlock runs the function again in a new transaction, a bounded number of
    times with backoff, without counting an attempt. SQLite has one writer
    at a time: the step holds the file's write lock while it runs, and every
    other write waits (keep transaction steps short).

    ``database="postgresql://..."``: the function writes in that application
    database instead of the world's; the step's output is recorded there too,
    in the same transaction (table ``workflow_transaction_outputs``), and
    copied to the world's log afterwards, so the writes still happen exactly
    once on any world (the memory world included).

    Raises:
        ValueError: an unknown ``isolation``, a ``database`` that is not a
            PostgreSQL URL, or a bad retry option.
        TypeError: the function is not ``async def``.
    """
    level = check_isolation(isolation)
    url = None if database is None else check_database(database)
    options = step(
        name=name,
        max_retries=max_retries,
        retry_delay=retry_delay,
        backoff=backoff,
        max_delay=max_delay,
        timeout=timeout,
    )

    def decorate(f: Callable[P, Coroutine[Any, Any, R]]) -> TransactionDefinition[P, R]:
        checked = options(f)  # the step's options, checked as @step checks them
        return TransactionDefinition(f, checked.name, checked.retry, checked.timeout, level, url)

    if fn is not None:
        return decorate(fn)
    return decorate  # type: ignore[return-value]  # one def stands for both overloads


_current: contextvars.ContextVar[Transaction | None] = contextvars.ContextVar(
    "workflow_transaction", default=None
)


def get_transaction() -> Transaction:
    """The transaction of the ``@transaction`` function running now.

    Raises:
        NotInWorkflowError: outside a ``@transaction`` function run by a Worker
            (a direct call, a plain step, workflow code).
    """
    found = _current.get()
    if found is None:
        raise NotInWorkflowError(
            "get_transaction() works inside a @transaction function run by a Worker"
            " (called from a workflow); a direct call runs without a transaction"
        )
    return found


@contextlib.contextmanager
def using(transaction: Transaction) -> Iterator[None]:
    """Make ``transaction`` what ``get_transaction()`` returns in this context (the
    worker does this around a transaction step's function)."""
    token = _current.set(transaction)
    try:
        yield
    finally:
        _current.reset(token)
