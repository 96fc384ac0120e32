"""Migration 11 of the SQLite world's schema: key limits, their fair shares and burst.

What: ``key_limits``, one row per key with a cap over all its values (``lim``,
the stored ``KeyLimit`` in ``spec``, with its weights, and ``vtime``, the pass of
the value served last); ``key_shares``, each value's pass (its place in the
weighted round-robin); the column ``slots.burst`` (default 0); and the index
``slots_key_held`` that counts a key's start-time slots held over all values.

Why: rfcs/0008-flow-control.md ("Key limits, weights and burst"; issue 27).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE key_limits (
        key TEXT PRIMARY KEY,
        lim INTEGER NOT NULL,
        spec BLOB NOT NULL,
        vtime REAL NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    """CREATE TABLE key_shares (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        share REAL NOT NULL,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID""",
    "ALTER TABLE slots ADD COLUMN burst INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX slots_key_held ON slots (key) WHERE holding = 1 AND hold = 0",
)
