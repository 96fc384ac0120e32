"""Migration 6 of the SQLite world's schema: run streams.

What: ``streams``, chunks numbered from 0 per (run, name).

Why: rfcs/0012-composition.md.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE streams (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    ) WITHOUT ROWID""",
)
