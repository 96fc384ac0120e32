"""Migration 2 of the PostgreSQL world's schema: hooks and their resume ids.

What: ``hooks`` (a live hook holds its token while its run is open) and
``hook_resumes`` (deliveries by resume id).

Why: a retried delivery keeps its answer, so deliveries by resume id are kept
after the run closes, until it is pruned (RFC 0006).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE hooks (
            token text PRIMARY KEY,
            run_id text NOT NULL,
            hook integer NOT NULL,
            attributes bytea NOT NULL,
            created_at timestamptz NOT NULL
        )""",
    "CREATE INDEX hooks_run ON hooks (run_id)",
    # Deliveries by resume id, kept after the run closes (until it is pruned)
    # so a retried delivery keeps its answer.
    """CREATE TABLE hook_resumes (
            token text NOT NULL,
            resume_id text NOT NULL,
            run_id text NOT NULL,
            PRIMARY KEY (token, resume_id)
        )""",
    "CREATE INDEX hook_resumes_run ON hook_resumes (run_id)",
)
