"""Migration 1 of the SQLite world's schema: the initial tables.

What: ``runs`` (a rowid table: results and attribute maps can be large, so
rows stay out of the interior pages of the primary-key b-tree), ``events``,
``attributes`` (index terms), ``claims`` and ``work``, with two partial
indexes on the queue.

Why: a lease scan never walks over items that are leased and still alive
(``work_free`` holds only free items, ``work_leased`` only leased ones).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    # rowid table: results and attribute maps can be large, so rows stay out of
    # the interior pages of the primary-key b-tree.
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        closed_at INTEGER,
        last_seq INTEGER NOT NULL,
        attributes BLOB NOT NULL,
        result BLOB,
        error BLOB
    )""",
    "CREATE INDEX runs_workflow ON runs (workflow, id)",
    "CREATE INDEX runs_status ON runs (status, id)",
    """CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE attributes (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX attributes_value ON attributes (key, ivalue, run_id)",
    """CREATE TABLE claims (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        value BLOB NOT NULL,
        run_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        step INTEGER,
        attempt INTEGER,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID""",
    """CREATE TABLE work (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        number INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        payload BLOB NOT NULL,
        available_at INTEGER NOT NULL,
        owner TEXT,
        token INTEGER NOT NULL,
        expires_at INTEGER,
        rewake INTEGER NOT NULL,
        ever_leased INTEGER NOT NULL,
        PRIMARY KEY (run_id, id)
    ) WITHOUT ROWID""",
    # Two partial indexes instead of one on available_at: a lease scan then never
    # walks over items that are leased and still alive.
    "CREATE INDEX work_free ON work (available_at) WHERE owner IS NULL",
    "CREATE INDEX work_leased ON work (expires_at) WHERE owner IS NOT NULL",
)
