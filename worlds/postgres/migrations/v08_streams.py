"""Migration 8 of the PostgreSQL world's schema: run streams.

What: ``streams``, chunks numbered from 0 per (run, name).

Why: rfcs/0012-composition.md.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE streams (
        run_id text NOT NULL,
        name text NOT NULL,
        seq integer NOT NULL,
        data bytea NOT NULL,
        at timestamptz NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    )""",
)
