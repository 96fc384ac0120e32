"""The SQLite world's current schema, and bringing a database up to it.

``SCHEMA`` is the reference DDL a new database is created with;
``worlds.sqlite.migrations`` holds the frozen text that takes an older
database to each later version. ``tests/worlds/test_sqlite_migrations.py``
checks that both paths give the same schema.
"""

from __future__ import annotations

import sqlite3

from worlds.errors import WorldMisconfiguredError
from worlds.sqlite.migrations import MIGRATIONS

SCHEMA_VERSION = max(MIGRATIONS)
"""Stored in ``PRAGMA user_version``: the version the last migration produces."""

SCHEMA = (
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
    , build_id TEXT, pin TEXT, admitted_at INTEGER)""",  # as v13's and v17's ALTER TABLE leave it
    "CREATE INDEX runs_workflow ON runs (workflow, id)",
    "CREATE INDEX runs_status ON runs (status, id)",
    # ``closed_at`` is set exactly when a run closes, so this indexes the closed runs.
    "CREATE INDEX runs_closed ON runs (closed_at, id) WHERE closed_at IS NOT NULL",
    "CREATE INDEX runs_created ON runs (created_at, status)",
    "CREATE INDEX runs_closed_status ON runs (closed_at, status) WHERE closed_at IS NOT NULL",
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
    # A claim whose ``run_id`` is NULL was released: the pair is free, and the row
    # keeps its generation so the next claim gets a higher one. ``lapses_at`` (once
    # the holder closed under a ttl) frees it from then on; ``pruned_status`` marks
    # a tombstone: the holder was pruned and the claim still refuses others.
    "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL",
    "CREATE INDEX claims_lapsing ON claims (lapses_at) WHERE lapses_at IS NOT NULL",
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
    # Live hooks only: a run's rows go when it closes, which frees its tokens.
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
    # A limited pair's holders and waiters; ``position`` orders arrivals, so a
    # pair's first waiter is the first row of ``slots_waiting``.
    """CREATE TABLE slots (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        position INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        value BLOB NOT NULL,
        lim INTEGER NOT NULL,
        holding INTEGER NOT NULL,
        hold INTEGER NOT NULL DEFAULT 0,
        priority INTEGER NOT NULL DEFAULT 0,
        burst INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue, position)
    ) WITHOUT ROWID""",
    "CREATE INDEX slots_holding ON slots (key, ivalue) WHERE holding = 1",
    "CREATE INDEX slots_waiting ON slots (key, ivalue, position) WHERE holding = 0",
    "CREATE INDEX slots_run ON slots (run_id)",
    # Waiters are promoted by priority, then arrival: the first row of ``slots_queue``.
    "CREATE INDEX slots_queue ON slots (key, ivalue, priority, position) WHERE holding = 0",
    # A key's start-time slots held over all its values (its key limit's count).
    "CREATE INDEX slots_key_held ON slots (key) WHERE holding = 1 AND hold = 0",
    # Key limits (``World.set_key_limit``) and each value's pass in their round-robin.
    """CREATE TABLE key_limits (
        key TEXT PRIMARY KEY,
        lim INTEGER NOT NULL,
        spec BLOB NOT NULL,
        vtime REAL NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    """CREATE TABLE key_shares (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        share REAL NOT NULL,
        queued INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID""",
    # A limited key's line of values waiting: by pass, then value (the next to serve).
    "CREATE INDEX key_shares_line ON key_shares (key, share, ivalue) WHERE queued = 1",
    # The tokens rate-limited pairs handed out; a pair's newest are its last rows.
    """CREATE TABLE rate_tokens (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        at INTEGER NOT NULL,
        run_id TEXT NOT NULL,
        number INTEGER NOT NULL,
        lim INTEGER NOT NULL,
        per REAL NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue, at, run_id, number)
    ) WITHOUT ROWID""",
    "CREATE INDEX rate_tokens_run ON rate_tokens (run_id)",
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
    "CREATE INDEX schedules_wake ON schedules (wake_at) WHERE paused = 0 AND wake_at IS NOT NULL",
    # Run streams: chunk ``seq`` counts from 0 per (run, name); pruning deletes them.
    """CREATE TABLE streams (
        run_id TEXT NOT NULL,
        name TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BLOB NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    ) WITHOUT ROWID""",
    # World settings, each written once (``World.setting``): the payload codec, say.
    """CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
    # Registered workers and their heartbeats (``World.register_worker``).
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
    # The updates each run accepted, by id, and where the log holds each (``World.send_update``).
    """CREATE TABLE updates (
        run_id TEXT NOT NULL,
        update_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (run_id, update_id)
    ) WITHOUT ROWID""",
    # Pinned deployments (RFC 0025): the runs that recorded a build, and each build's
    # workflows with their pins (``World.register_worker`` with a build id).
    "CREATE INDEX runs_build ON runs (build_id, status) WHERE build_id IS NOT NULL",
    """CREATE TABLE deployments (
        build_id TEXT NOT NULL,
        workflow TEXT NOT NULL,
        pin TEXT NOT NULL,
        registered_at INTEGER NOT NULL,
        PRIMARY KEY (build_id, workflow)
    ) WITHOUT ROWID""",
    # Slot history (``World.slot_history``): a sample per limited pair and minute it changed.
    """CREATE TABLE slot_samples (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        minute INTEGER NOT NULL,
        holders INTEGER NOT NULL,
        waiters INTEGER NOT NULL,
        peak_holders INTEGER NOT NULL,
        peak_waiters INTEGER NOT NULL,
        PRIMARY KEY (key, ivalue, minute)
    ) WITHOUT ROWID""",
    "CREATE INDEX slot_samples_key ON slot_samples (key, minute)",
    "CREATE INDEX slot_samples_minute ON slot_samples (minute)",
)
"""The current schema: what a new database is created with (as version ``SCHEMA_VERSION``)."""


def apply_schema(db: sqlite3.Connection) -> None:
    """Create the schema in an empty database, or migrate an older one in place.

    Refuses a database written by a newer version. Runs inside the caller's
    write transaction, so a migration is all or nothing.
    """
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise WorldMisconfiguredError(
            f"the database has schema version {version}; this runtime knows up to "
            f"{SCHEMA_VERSION}: upgrade the runtime"
        )
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        statements: list[str] = list(SCHEMA)
    else:
        # in order (sorted, not a range: numbers are handed out ahead of merging)
        statements = [s for v in sorted(MIGRATIONS) if v > version for s in MIGRATIONS[v]]
    for statement in statements:
        db.execute(statement)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
