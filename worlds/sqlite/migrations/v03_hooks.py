"""Migration 3 of the SQLite world's schema: hooks and their resume ids.

What: ``hooks`` (a live hook holds its token while its run is open) and
``hook_resumes`` (deliveries by resume id, kept until the run is pruned).

Why: RFC 0006; a retried delivery keeps its answer.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE hooks (
        token TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        hook INTEGER NOT NULL,
        attributes BLOB NOT NULL,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX hooks_run ON hooks (run_id)",
    """CREATE TABLE hook_resumes (
        token TEXT NOT NULL,
        resume_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        PRIMARY KEY (token, resume_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX hook_resumes_run ON hook_resumes (run_id)",
)
