"""The PostgreSQL world's schema: its name, version, and applying migrations.

Every table lives in the world's schema: connections set ``search_path`` to it,
so statements name tables without a schema. Times are ``timestamptz``
(microseconds, like Python's datetimes); events, attribute maps and claim values
are msgpack ``bytea``. There are no foreign keys: every write already goes
through the run row's lock, and pruning deletes a run's rows together.

The tables (see ``migrations.py`` for their DDL): ``runs`` (one row per run,
its status, last sequence number and time, attribute map, result, error),
``events`` (a run's log by ``(run_id, seq)``), ``attributes`` (the index terms
of run attributes), ``claims`` (unique (key, value) pairs; a NULL ``run_id``
is a released pair keeping its generation), ``work`` (the queue: workflow
tasks, steps and timers with their leases), ``hooks`` and ``hook_resumes``,
and ``schema_migrations`` (one row per applied version).
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
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                await conn.execute(statement, timeout=MIGRATION_TIMEOUT)
            await conn.execute(RECORD_VERSION, target)
    return SCHEMA_VERSION
