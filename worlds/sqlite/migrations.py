"""The frozen migrations of the SQLite world's schema.

``MIGRATIONS[v]`` is the literal SQL that produces schema version ``v`` from
version ``v - 1``; version 1 is the initial schema. The text is frozen: it is
what each version was when it shipped, and never changes with today's schema.
A change to the schema is a new version here, mirrored in
``worlds.sqlite.schema.SCHEMA`` (what a new database is created with);
``tests/worlds/test_sqlite_migrations.py`` checks that both paths agree.
"""

from __future__ import annotations

MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 1: the initial schema.
    1: (
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
    ),
    # 2: claims may be released (run_id NULL); indexes for run_claims and prune_runs.
    2: (
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
    ),
    # 3: hooks and their resume ids.
    3: (
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
    ),
    # 4: run streams (rfcs/0012-composition.md).
    4: (
        """CREATE TABLE streams (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    ) WITHOUT ROWID""",
    ),
}
"""The statements that produce each schema version from the one before."""
