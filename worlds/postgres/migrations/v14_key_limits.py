"""Migration 14 of the PostgreSQL world's schema: key limits, their fair shares and burst.

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
        key text PRIMARY KEY,
        lim integer NOT NULL,
        spec bytea NOT NULL,
        vtime double precision NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE key_shares (
        key text NOT NULL,
        ivalue text NOT NULL,
        share double precision NOT NULL,
        PRIMARY KEY (key, ivalue)
    )""",
    "ALTER TABLE slots ADD COLUMN burst integer NOT NULL DEFAULT 0",
    "CREATE INDEX slots_key_held ON slots (key) WHERE holding AND hold = 0",
)
