"""Migration 4 of the SQLite world's schema: flow control.

What: ``slots``, the holders and waiters of limited pairs in arrival order;
claims get reuse windows (``ttl``, ``release_on``, ``lapses_at``) and
tombstones (``pruned_status``: the pruned holder's final status), the table
rebuilt with the new columns.

Why: RFC 0008 (``Limited``, ``Unique(v, ttl=..., release_on=...)``, pruning
that keeps claims as tombstones).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE claims_v4 (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        value BLOB NOT NULL,
        run_id TEXT,
        generation INTEGER NOT NULL,
        step INTEGER,
        attempt INTEGER,
        ttl REAL,
        release_on TEXT,
        lapses_at INTEGER,
        pruned_status TEXT,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID""",
    "INSERT INTO claims_v4 (key, ivalue, value, run_id, generation, step, attempt) "
    "SELECT key, ivalue, value, run_id, generation, step, attempt FROM claims",
    "DROP TABLE claims",
    "ALTER TABLE claims_v4 RENAME TO claims",
    "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL",
    "CREATE INDEX claims_lapsing ON claims (lapses_at) WHERE lapses_at IS NOT NULL",
    """CREATE TABLE slots (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        position INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        value BLOB NOT NULL,
        lim INTEGER NOT NULL,
        holding INTEGER NOT NULL,
        PRIMARY KEY (key, ivalue, position)
    ) WITHOUT ROWID""",
    "CREATE INDEX slots_holding ON slots (key, ivalue) WHERE holding = 1",
    "CREATE INDEX slots_waiting ON slots (key, ivalue, position) WHERE holding = 0",
    "CREATE INDEX slots_run ON slots (run_id)",
)
