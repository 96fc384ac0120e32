"""Migrated, emptied PostgreSQL world schemas, handed to tests under fresh names.

A test's PostgreSQL world used to be a fresh schema that the world migrated on first
use and the fixture dropped afterwards: about 150-200 ms of server and client CPU a
test (twenty migrations, their PL/pgSQL functions and indexes, then ``DROP SCHEMA
CASCADE``), against 20-30 ms to open a world whose schema is migrated already; over
the suite's ~1,200 PostgreSQL worlds that was the largest cost of its servers
(rfcs/0020-test-suite.md, fifth pass). ``SchemaPool`` keeps the schemas instead:

* ``take(name)`` renames a pooled schema to ``name``, the test's own fresh name, so the
  world finds it migrated and empty (and its notification channels, named after the
  schema, are new). With none pooled, the schema is migrated under ``name``.
* ``give_back(name)``, after the test, renames it away at once (a process the test left
  behind then finds no schema of that name, and ``ALTER SCHEMA ... RENAME`` makes every
  session replan, so none writes through a prepared statement either), empties every
  table the test wrote (``TRUNCATE``: a new, empty file, as in a fresh schema; a table
  never written is one already) but ``schema_migrations``, restarts its sequences, and
  pools it, unless its catalog (tables, columns, indexes, constraints, functions,
  grants, migration versions) differs from a freshly migrated one: a test that changed
  the schema gets it dropped, as before.

One pool per xdist worker (each has its own server), on one connection of its own, run
on an event loop in a thread of its own so the fixtures stay synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg

from worlds.postgres import PostgresWorld

__all__ = ["SchemaPool"]

T = TypeVar("T")

FINGERPRINT = """
SELECT md5(string_agg(part, ',' ORDER BY part)) FROM (
  SELECT concat_ws(' ', 'rel', c.relname, c.relkind, c.relacl) AS part
    FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT concat_ws(' ', 'col', c.relname, a.attname, a.atttypid, a.attnotnull, a.attnum,
                   pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = $1::text::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT concat_ws(' ', 'fn', p.proname, pg_get_function_identity_arguments(p.oid),
                   md5(p.prosrc), p.proacl)
    FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace
  UNION ALL
  SELECT concat_ws(' ', 'con', k.conname, pg_get_constraintdef(k.oid))
    FROM pg_constraint k WHERE k.connamespace = $1::text::regnamespace
  UNION ALL
  SELECT concat_ws(' ', 'idx', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT concat_ws(' ', 'trg', t.tgname, t.tgenabled)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = $1::text::regnamespace
  UNION ALL
  SELECT concat_ws(' ', 'acl', n.nspacl) FROM pg_namespace n WHERE n.oid = $1::text::regnamespace
) parts
"""
"""A digest of a schema's catalog, with the names the schema's own name does not enter."""

WRITTEN_TABLES = """
SELECT quote_ident(c.relname) FROM pg_class c
 WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'r'
   AND c.relname <> 'schema_migrations' AND pg_relation_size(c.oid) > 0
"""

SEQUENCES = """
SELECT quote_ident(c.relname) FROM pg_class c
 WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'S'
"""


def quote(name: str) -> str:
    """``name`` as a quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


class SchemaPool:
    """Migrated, empty world schemas on the server at ``url`` (see the module docstring)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._conn: asyncpg.Connection | None = None
        self._pooled: list[str] = []
        self._pristine: str | None = None
        """The fingerprint of a schema just migrated: what a pooled one must match."""
        self.reused = 0

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=120)

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._url)
        return self._conn

    def take(self, name: str, world_url: str) -> None:
        """Make schema ``name`` a migrated, empty world (``world_url`` is its URL)."""
        self._run(self._take(name, world_url))

    async def _take(self, name: str, world_url: str) -> None:
        conn = await self._connection()
        while self._pooled:
            pooled = self._pooled.pop()
            with contextlib.suppress(asyncpg.exceptions.PostgresError):
                await conn.execute(f"ALTER SCHEMA {quote(pooled)} RENAME TO {quote(name)}")
                self.reused += 1
                return
        world = PostgresWorld(world_url)
        async with world:
            await world.migrate()
        if self._pristine is None:
            self._pristine = await conn.fetchval(FINGERPRINT, name)

    def give_back(self, name: str) -> bool:
        """Pool schema ``name`` emptied, under a name no test uses; False when it was not
        as migrated (the caller drops it then)."""
        try:
            return self._run(self._give_back(name))
        except (_ChangedError, OSError, asyncpg.exceptions.PostgresError, TimeoutError):
            return False

    async def _give_back(self, name: str) -> bool:
        conn = await self._connection()
        pooled = f"pool_{uuid.uuid4().hex[:16]}"
        async with conn.transaction():
            # a process the test left holding locks makes this give up, not wait
            await conn.execute("SET LOCAL lock_timeout = '5s'")
            await conn.execute(f"ALTER SCHEMA {quote(name)} RENAME TO {quote(pooled)}")
            if self._pristine is None or await conn.fetchval(FINGERPRINT, pooled) != self._pristine:
                raise _ChangedError
            written = [row[0] for row in await conn.fetch(WRITTEN_TABLES, pooled)]
            if written:
                tables = ", ".join(f"{quote(pooled)}.{table}" for table in written)
                await conn.execute(f"TRUNCATE {tables}")
            for (sequence,) in await conn.fetch(SEQUENCES, pooled):
                await conn.execute(f"ALTER SEQUENCE {quote(pooled)}.{sequence} RESTART")
        self._pooled.append(pooled)
        return True

    def close(self) -> None:
        """Drop the pooled schemas (best effort) and close the connection."""

        async def close() -> None:
            if self._conn is None or self._conn.is_closed():
                return
            with contextlib.suppress(OSError, asyncpg.exceptions.PostgresError):
                for pooled in self._pooled:
                    await self._conn.execute(f"DROP SCHEMA IF EXISTS {quote(pooled)} CASCADE")
            await self._conn.close()

        with contextlib.suppress(OSError, asyncpg.exceptions.PostgresError, TimeoutError):
            self._run(close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class _ChangedError(Exception):
    """The schema the test gave back is not as migrated: it is dropped, not pooled."""
