"""Migration 5 of the SQLite world's schema: schedules.

What: ``schedules``, with a timer-like index on their wake time.

Why: rfcs/0009-schedules.md; workers look only at unpaused schedules that are
due.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        spec BLOB NOT NULL,
        paused INTEGER NOT NULL,
        note TEXT,
        next_fire_at INTEGER,
        buffered_at INTEGER,
        wake_at INTEGER,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        leased_until INTEGER
    ) WITHOUT ROWID""",
    # Workers look only at unpaused schedules that are due: a timer index.
    "CREATE INDEX schedules_wake ON schedules (wake_at) WHERE paused = 0 AND wake_at IS NOT NULL",
)
