"""Migration 9 of the SQLite world's schema: rate-limit tokens and waiting priority.

What: ``rate_tokens``, one row per token a rate-limited pair handed out (its
time ``at`` in microseconds, the run and ``number``: 0 for a start,
a ``rate_limit`` call's number else, and the rate it was taken under), keyed
so a pair's newest tokens are the last rows of its key range; and the column
``slots.priority`` (default 0) with the index ``slots_queue`` that orders a
pair's waiters by priority, then arrival.

Why: rfcs/0008-flow-control.md ("Rate limits", "Priority"; issue 27).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE rate_tokens (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        at INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        lim INTEGER NOT NULL,
        per REAL NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue, at, run_id, number)
    ) WITHOUT ROWID""",
    "CREATE INDEX rate_tokens_run ON rate_tokens (run_id)",
    "ALTER TABLE slots ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX slots_queue ON slots (key, ivalue, priority, position) WHERE holding = 0",
)
