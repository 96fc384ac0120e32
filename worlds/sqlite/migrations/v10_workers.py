"""Migration 10 of the SQLite world's schema: registered workers.

What: ``workers``, one row per registered worker (who it is, its liveness
window, its first and last heartbeats, the start of its steady run of beats,
the count of items it holds, whether it was fenced or stopped). No index of
work by holder: revoking a fenced worker's leases is rare, and an index on
``owner`` would cost every lease.

Why: rfcs/0001-execution-model.md ("Worker liveness"): leases follow their
holder's liveness, not their own timers.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        build_id TEXT,
        liveness REAL NOT NULL,
        started_at INTEGER NOT NULL,
        last_beat INTEGER NOT NULL,
        steady_since INTEGER NOT NULL,
        in_flight INTEGER NOT NULL,
        fenced INTEGER NOT NULL,
        stopped INTEGER NOT NULL
    ) WITHOUT ROWID""",
)
