"""The SQLite world's transactions: running them and retrying locks.

``transact`` runs a body in ``BEGIN IMMEDIATE`` and rolls back on any
exception; a flow's ``Rollback`` (``worlds._flows.rows``) is rolled back and
its result returned. ``run_once`` and ``retrying`` wait out another process's
lock; an inline attempt that would wait raises ``WouldBlockError`` instead.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar, cast

from worlds._flows.rows import Rollback

__all__ = ["WouldBlockError", "is_busy", "new_token", "retrying", "run_once", "transact"]

T = TypeVar("T")

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_RETRIES = 8


class WouldBlockError(Exception):
    """An inline attempt met a lock; the operation must run where it may wait."""


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
    db: sqlite3.Connection,
    body: Callable[[sqlite3.Connection], T],
    *,
    blocking: bool,
    before_commit: Callable[[], None] | None = None,
) -> T:
    """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any exception.

    ``before_commit`` runs after ``body``, under the write lock: an exception it
    raises rolls the transaction back, so nothing is committed (or acknowledged).
    """

    def one_try() -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            result = body(db)
            if before_commit is not None:
                before_commit()
            db.execute("COMMIT")
        except Rollback as rollback:
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
