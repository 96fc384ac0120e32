"""Migration 2 of the SQLite world's schema: releasable claims.

What: ``claims.run_id`` may be NULL (a released pair keeping its generation),
rebuilt as a new table since SQLite cannot drop a NOT NULL; indexes for
``run_claims`` (``claims_run``) and ``prune_runs`` (``runs_closed``).

Why: ``prune_runs(release_claims=True)`` (RFC 0002) releases a pair without
forgetting its generation, so fencing tokens never go back.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE claims_v2 (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        value BLOB NOT NULL,
        run_id TEXT,
        generation INTEGER NOT NULL,
        step INTEGER,
        attempt INTEGER,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID""",
    "INSERT INTO claims_v2 SELECT key, ivalue, value, run_id, generation, step, attempt "
    "FROM claims",
    "DROP TABLE claims",
    "ALTER TABLE claims_v2 RENAME TO claims",
    "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL",
    "CREATE INDEX runs_closed ON runs (closed_at, id) WHERE closed_at IS NOT NULL",
)
