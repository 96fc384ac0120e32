"""The PostgreSQL world's schema: its name, version, and applying migrations.

Every table lives in the world's schema: connections set ``search_path`` to it,
so statements name tables without a schema. Times are ``timestamptz``
(microseconds, like Python's datetimes); events, attribute maps and claim values
are msgpack ``bytea``. There are no foreign keys: every write already goes
through the run row's lock, and pruning deletes a run's rows together.

``REFERENCE`` is the current schema written out in one piece, for reading:
what every table holds once all migrations ran. Databases are built and
upgraded by ``MIGRATIONS`` only; a test creates ``REFERENCE`` in a schema of
its own and checks that it equals a migrated one, so the two never drift.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from worlds._urls import redact_url
from worlds.errors import WorldMisconfiguredError
from worlds.postgres.connection import MIGRATION_TIMEOUT
from worlds.postgres.migrations import MIGRATIONS

if TYPE_CHECKING:
    from worlds.postgres.connection import Connection

SCHEMA_VERSION = max(MIGRATIONS)
"""The newest migration; ``schema_migrations`` records each one applied."""


REFERENCE: tuple[str, ...] = (
    # One row per run; ``last_seq``/``last_at`` are its log's last event's.
    """CREATE TABLE runs (
        id text PRIMARY KEY,
        workflow text NOT NULL,
        status text NOT NULL,
        created_at timestamptz NOT NULL,
        started_at timestamptz,
        closed_at timestamptz,
        last_seq integer NOT NULL,
        attributes bytea NOT NULL,
        result bytea,
        error bytea,
        last_at timestamptz,
        build_id text,
        pin text,
        admitted_at timestamptz
    )""",
    "CREATE INDEX runs_workflow ON runs (workflow, id)",
    "CREATE INDEX runs_status ON runs (status, id)",
    "CREATE INDEX runs_closed ON runs (closed_at, id) WHERE closed_at IS NOT NULL",
    "CREATE INDEX runs_created ON runs (created_at, status)",
    "CREATE INDEX runs_closed_status ON runs (closed_at, status) WHERE closed_at IS NOT NULL",
    # A run's log; rows stored with seq 0 in ``data`` take ``seq`` and ``at``.
    """CREATE TABLE events (
        run_id text NOT NULL,
        seq integer NOT NULL,
        kind text NOT NULL,
        data bytea NOT NULL,
        at timestamptz,
        PRIMARY KEY (run_id, seq)
    )""",
    # The index terms of run attributes (``worlds.semantics.index_value``).
    """CREATE TABLE attributes (
        run_id text NOT NULL,
        key text NOT NULL,
        ivalue text NOT NULL,
        PRIMARY KEY (run_id, key)
    )""",
    "CREATE INDEX attributes_value ON attributes (key, ivalue, run_id)",
    # Unique (key, value) pairs; a NULL run_id is a released pair keeping its generation,
    # a ``pruned_status`` a tombstone (the holder was pruned; the claim still refuses).
    """CREATE TABLE claims (
        key text NOT NULL,
        ivalue text NOT NULL,
        value bytea NOT NULL,
        run_id text,
        generation bigint NOT NULL,
        step integer,
        attempt integer,
        ttl double precision,
        release_on text,
        lapses_at timestamptz,
        pruned_status text,
        PRIMARY KEY (key, ivalue)
    )""",
    "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL",
    # ``lapses_at``: the holder closed under a ttl; the pair is free from then on.
    "CREATE INDEX claims_lapsing ON claims (lapses_at) WHERE lapses_at IS NOT NULL",
    # The queue: workflow tasks, steps and timers, with their leases.
    """CREATE TABLE work (
        id text PRIMARY KEY,
        run_id text NOT NULL,
        kind text NOT NULL,
        name text NOT NULL,
        number integer NOT NULL,
        attempt integer NOT NULL,
        payload bytea NOT NULL,
        available_at timestamptz NOT NULL,
        owner text,
        token bigint NOT NULL,
        expires_at timestamptz,
        rewake boolean NOT NULL DEFAULT false,
        ever_leased boolean NOT NULL
    )""",
    "CREATE INDEX work_run ON work (run_id)",
    "CREATE INDEX work_free ON work (name, available_at) WHERE owner IS NULL",
    "CREATE INDEX work_leased ON work (name, expires_at) WHERE owner IS NOT NULL",
    # Live hooks hold their tokens while their run is open.
    """CREATE TABLE hooks (
        token text PRIMARY KEY,
        run_id text NOT NULL,
        hook integer NOT NULL,
        attributes bytea NOT NULL,
        created_at timestamptz NOT NULL
    )""",
    "CREATE INDEX hooks_run ON hooks (run_id)",
    # Deliveries by resume id, kept until the run is pruned.
    """CREATE TABLE hook_resumes (
        token text NOT NULL,
        resume_id text NOT NULL,
        run_id text NOT NULL,
        PRIMARY KEY (token, resume_id)
    )""",
    "CREATE INDEX hook_resumes_run ON hook_resumes (run_id)",
    # Limited pairs: a row per holder or waiter; ``position`` orders arrivals.
    """CREATE TABLE slots (
        key text NOT NULL,
        ivalue text NOT NULL,
        position bigint NOT NULL,
        run_id text NOT NULL,
        value bytea NOT NULL,
        lim integer NOT NULL,
        holding boolean NOT NULL,
        hold integer NOT NULL DEFAULT 0,
        priority integer NOT NULL DEFAULT 0,
        burst integer NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue, position)
    )""",
    "CREATE SEQUENCE slot_positions",
    "CREATE INDEX slots_holding ON slots (key, ivalue) WHERE holding",
    "CREATE INDEX slots_waiting ON slots (key, ivalue, position) WHERE NOT holding",
    "CREATE INDEX slots_run ON slots (run_id)",
    # Waiters are promoted by priority, then arrival: the first row of ``slots_queue``.
    "CREATE INDEX slots_queue ON slots (key, ivalue, priority, position) WHERE NOT holding",
    # A key's start-time slots held over all its values (its key limit's count).
    "CREATE INDEX slots_key_held ON slots (key) WHERE holding AND hold = 0",
    # Key limits (``World.set_key_limit``) and each value's pass in their round-robin.
    """CREATE TABLE key_limits (
        key text PRIMARY KEY,
        lim integer NOT NULL,
        spec bytea NOT NULL,
        vtime double precision NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE key_shares (
        key text NOT NULL,
        ivalue text NOT NULL,
        share double precision NOT NULL,
        queued boolean NOT NULL DEFAULT false,
        PRIMARY KEY (key, ivalue)
    )""",
    # A limited key's line of values waiting: by pass, then value (the next to serve).
    'CREATE INDEX key_shares_line ON key_shares (key, share, ivalue COLLATE "C") WHERE queued',
    # The tokens rate-limited pairs handed out; a pair's newest end its key range.
    """CREATE TABLE rate_tokens (
        key text NOT NULL,
        ivalue text NOT NULL,
        at timestamptz NOT NULL,
        run_id text NOT NULL,
        number integer NOT NULL,
        lim integer NOT NULL,
        per double precision NOT NULL,
        priority integer NOT NULL DEFAULT 0,
        PRIMARY KEY (key, ivalue, at, run_id, number)
    )""",
    "CREATE INDEX rate_tokens_run ON rate_tokens (run_id)",
    """CREATE TABLE schedules (
        id text PRIMARY KEY,
        workflow text NOT NULL,
        spec bytea NOT NULL,
        paused boolean NOT NULL,
        note text,
        next_fire_at timestamptz,
        buffered_at timestamptz,
        wake_at timestamptz,
        version bigint NOT NULL,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        leased_until timestamptz
    )""",
    # Workers look only at unpaused schedules that are due: a timer index.
    "CREATE INDEX schedules_wake ON schedules (wake_at) WHERE NOT paused AND wake_at IS NOT NULL",
    # Run streams: chunk ``seq`` counts from 0 per (run, name); pruning deletes them.
    """CREATE TABLE streams (
        run_id text NOT NULL,
        name text NOT NULL,
        seq integer NOT NULL,
        data bytea NOT NULL,
        at timestamptz NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    )""",
    # World settings, each written once (``World.setting``): the payload codec, say.
    """CREATE TABLE settings (
        key text PRIMARY KEY,
        value text NOT NULL
    )""",
    # Registered workers and their heartbeats (``World.register_worker``).
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
    # The updates each run accepted, by id, and where the log holds each.
    """CREATE TABLE updates (
        run_id text NOT NULL,
        update_id text NOT NULL,
        seq bigint NOT NULL,
        PRIMARY KEY (run_id, update_id)
    )""",
    # Pinned deployments (RFC 0025): the runs that recorded a build, and each build's
    # workflows with their pins (``World.register_worker`` with a build id).
    "CREATE INDEX runs_build ON runs (build_id, status) WHERE build_id IS NOT NULL",
    """CREATE TABLE deployments (
        build_id text NOT NULL,
        workflow text NOT NULL,
        pin text NOT NULL,
        registered_at timestamptz NOT NULL,
        PRIMARY KEY (build_id, workflow)
    )""",
    # Slot history (``World.slot_history``): a sample per limited pair and minute it changed.
    """CREATE TABLE slot_samples (
        key text NOT NULL,
        ivalue text NOT NULL,
        minute timestamptz NOT NULL,
        holders integer NOT NULL,
        waiters integer NOT NULL,
        peak_holders integer NOT NULL,
        peak_waiters integer NOT NULL,
        PRIMARY KEY (key, ivalue, minute)
    )""",
    "CREATE INDEX slot_samples_key ON slot_samples (key, minute)",
    "CREATE INDEX slot_samples_minute ON slot_samples (minute)",
    # The PL/pgSQL functions (``commit_run``, ``commit_runs``, ``start_run``,
    # ``create_run``): their live text is in ``worlds.postgres.functions``.
)
"""The current tables and indexes (functions aside), for reading; see the module docstring."""


def quote(name: str) -> str:
    """``name`` as a quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def lock_key(schema: str) -> int:
    """The advisory lock that serializes migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.blake2b(f"workflow-migrate:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def channel(schema: str, what: str = "work") -> str:
    """The LISTEN/NOTIFY channel of ``what`` (``work`` or ``runs``) of the worlds in
    ``schema`` (at most 63 bytes).

    Work and run topics have channels of their own, so a process listens only to
    what it waits for: workers hear no run closing, clients no queued work.
    """
    name = f"workflow.{what}.{schema}"
    if len(name) <= 63:
        return name
    return f"workflow.{what}." + hashlib.blake2b(schema.encode(), digest_size=16).hexdigest()


def migration_statements(schema: str) -> tuple[str, ...]:
    """Statements run before migrating, in the migrating transaction."""
    return (
        f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}",
        f"CREATE TABLE IF NOT EXISTS {quote(schema)}.schema_migrations ("
        "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )


APPLIED_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"
RECORD_VERSION = "INSERT INTO schema_migrations (version) VALUES ($1)"


async def migrate(conn: Connection, schema: str, *, create: bool, url: str) -> int:
    """Apply the migrations ``schema`` lacks, under an advisory lock; the version reached.

    Raises:
        WorldMisconfiguredError: ``create`` is false and ``schema`` holds no world,
            or the schema is newer than this runtime.
    """
    if not create and not await conn.fetchval(
        "SELECT to_regclass($1) IS NOT NULL", f"{quote(schema)}.runs"
    ):
        raise WorldMisconfiguredError(
            f"no PostgreSQL world in schema {schema!r} of "
            f"{redact_url(url)}: no such schema or it holds no runs table"
        )
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", lock_key(schema))
        for statement in migration_statements(schema):
            await conn.execute(statement)
        version = int(await conn.fetchval(APPLIED_VERSION))
        if version > SCHEMA_VERSION:
            raise WorldMisconfiguredError(
                f"schema {schema!r} has version {version}; this runtime knows up to "
                f"{SCHEMA_VERSION}: upgrade the runtime"
            )
        # the versions in order (sorted, not a range: numbers are handed out ahead of merging)
        for target in sorted(v for v in MIGRATIONS if v > version):
            for statement in MIGRATIONS[target]:
                await conn.execute(statement, timeout=MIGRATION_TIMEOUT)
            await conn.execute(RECORD_VERSION, target)
    return SCHEMA_VERSION
