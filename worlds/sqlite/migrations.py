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
    # 4: concurrency slots of limited pairs (holders and waiters, in arrival order);
    # claims get reuse windows (ttl, release_on, lapses_at) and tombstones
    # (pruned_status: the pruned holder's final status).
    4: (
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
    ),
    # 5: schedules (rfcs/0009-schedules.md).
    5: (
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
        "CREATE INDEX schedules_wake ON schedules (wake_at) "
        "WHERE paused = 0 AND wake_at IS NOT NULL",
    ),
    # 6: run streams (rfcs/0012-composition.md).
    6: (
        """CREATE TABLE streams (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    ) WITHOUT ROWID""",
    ),
    # 7: slots taken by ``hold`` inside workflows (rfcs/0008-flow-control.md):
    # a row's hold number (0: a start-time slot of ``Limited``).
    7: ("ALTER TABLE slots ADD COLUMN hold INTEGER NOT NULL DEFAULT 0",),
}
"""The statements that produce each schema version from the one before."""
