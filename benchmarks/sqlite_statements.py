"""Counting the SQL statements a process sends SQLite, whichever library sends them.

While installed, every connection ``sqlite3.connect`` opens gets a trace
callback (``sqlite3.Connection.set_trace_callback``) that counts each statement
it executes, ``BEGIN`` and ``COMMIT`` included: our worlds and DBOS (through
SQLAlchemy) alike, so ``statements per workflow`` compares like with like.

Usage::

    with SqliteStatements() as statements:
        ...  # open worlds, run workflows
        before = statements.count
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

__all__ = ["SqliteStatements"]


class SqliteStatements:
    """Counts the statements of every SQLite connection opened while installed.

    Args:
        by_text: also count each statement by its first 60 characters (``texts``).
    """

    def __init__(self, *, by_text: bool = False) -> None:
        self.count = 0
        self.texts: dict[str, int] = {}
        self._by_text = by_text
        self._connect: Callable[..., sqlite3.Connection] = sqlite3.connect

    def __enter__(self) -> SqliteStatements:
        original = self._connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            db = original(*args, **kwargs)
            db.set_trace_callback(self._traced)
            return db

        # SQLAlchemy's driver calls ``sqlite3.dbapi2.connect``: the same function
        sqlite3.connect = sqlite3.dbapi2.connect = connect  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        sqlite3.connect = sqlite3.dbapi2.connect = self._connect  # type: ignore[assignment]

    def _traced(self, statement: str) -> None:
        self.count += 1
        if self._by_text:
            head = " ".join(statement.split())[:60]
            self.texts[head] = self.texts.get(head, 0) + 1
