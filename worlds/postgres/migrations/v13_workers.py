"""Migration 13 of the PostgreSQL world's schema: registered workers.

What: ``workers``, one row per registered worker (who it is, its liveness
window in seconds, its first and last heartbeats, the start of its steady run
of beats, the count of items it holds, whether it was fenced or stopped). No
index of work by holder: revoking a fenced worker's leases is rare, and an
index on ``owner`` would cost every lease its heap-only update.

Why: rfcs/0001-execution-model.md ("Worker liveness"): leases follow their
holder's liveness, not their own timers.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE workers (
        id text PRIMARY KEY,
        host text NOT NULL,
        pid integer NOT NULL,
        build_id text,
        liveness double precision NOT NULL,
        started_at timestamptz NOT NULL,
        last_beat timestamptz NOT NULL,
        steady_since timestamptz NOT NULL,
        in_flight integer NOT NULL,
        fenced boolean NOT NULL,
        stopped boolean NOT NULL
    )""",
)
