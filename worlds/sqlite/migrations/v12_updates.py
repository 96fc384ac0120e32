"""Migration 12 of the SQLite world's schema: the updates each run accepted.

What: ``updates``, one row per (run, update id) a run accepted, with the
sequence number of its ``UpdateReceived`` event. The primary key makes an id
accepted once per run; the answer is read from the run's log from that event on.

Why: rfcs/0021-updates.md: an update is delivered once per id, whatever the
number of callers, and every caller gets the one recorded reply.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE updates (
        run_id TEXT NOT NULL,
        update_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (run_id, update_id)
    ) WITHOUT ROWID""",
)
