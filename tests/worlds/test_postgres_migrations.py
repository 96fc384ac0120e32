"""The PostgreSQL world's migrations: frozen, and any older schema migrates to a fresh one."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import asyncpg
import pytest

from tests.conftest import fresh_schema, with_schema
from tests.worlds.migration_modules import versions_by_module
from worlds.postgres import PostgresWorld, functions
from worlds.postgres import migrations as migrations_package
from worlds.postgres.migrations import MIGRATIONS
from worlds.postgres.schema import (
    RECORD_VERSION,
    REFERENCE,
    SCHEMA_VERSION,
    migration_statements,
    quote,
)

pytestmark = pytest.mark.anyio

FROZEN = {
    1: "4af1c90903f16e18b18f2b30069915bcfc6139b9e8622190f4c26a552dbd1ce7",
    2: "bad03c983051fd7225b57c0a946d7e19973500b4eb342fb2ee4812ae49502ade",
    3: "e6e6ace399b4400e7bdebc6ccc4624b5fd880a43ec74baf9887aa9ae0f20fd74",
    4: "feef3bf1d682a36fef668d2b3824c0887285d9370402f7d39860116040d15fed",
    5: "f0ec9b1115fc724ccbca64a2b4b9f3449ac0b9b53a198e0e65b0475c9c59f2dd",
    6: "907562cd9f320690e82a47acbd867bfe71216787a9a44696dc74648ec01e1dd6",
    7: "6b5f78fb45320730a6ff105a3417797f6713e2169b484133bbf6fd74f8bbf3f9",
    8: "a69ff3393f7e908e16855303d2b63a5b0e1e70dc2ac3d7aa65276c853b24b9fa",
    9: "4f21322ff61fdc561ed8f80c7f0130d5426d8642b8a380e04e4c69624d83a138",
    10: "92c3b59a532a581a60e34adfbb78dc45583fea5cabc98060d152dbae3c7bfd90",
    11: "cd5ae974b73bf208c6bc8b94ea0a77b8ea06af71c12425ac12f0fe666144d95f",
    12: "7fceb9058010f1fba76eba19a6f4219a580aeed1e31fbbb5aa18cf5333125ec1",
    13: "bda0004de01d1494adbda5f43600832ec23dfaff3e6ee23bd9af02c5ff2b5aed",
    14: "243d5ed219c4e03b01f73e8beb0989bb09b8799b1f324de590dddb8600c8efd6",
    15: "0272b94b13cc51d51775e0aced78c6a44e5df94624d896aeaf09002b99e92051",
    16: "c11b2e9246fe57d5316d8e901068b403105d1dd4ed67092eb625070a4b81a99a",
    17: "e95a82edf50b8991c507367973b5e6fef8028e0e015fb392f428d9f31ab482a3",
    18: "955711fa1d879fafb18a7751d8e9f482ad631f05fb9ca29d46a32fd5c9f5051e",
    19: "24595c99975263913e7f243f40344dd16b4db09e1b16ca104988f57a227a4c78",
    20: "ca97cc0a38f956f7215f46b45df4ec0b7ed8a6a698dd4b5fa27492c3bc774252",
}
"""sha256 of each migration's statements: a database at version v ran exactly these."""


def _digest(version: int) -> str:
    return hashlib.sha256("\x00".join(MIGRATIONS[version]).encode()).hexdigest()


def test_migrations_are_numbered_from_one_and_frozen() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
    assert {version: _digest(version) for version in MIGRATIONS} == FROZEN


def test_each_version_is_a_module_that_says_what_and_why() -> None:
    assert versions_by_module(migrations_package) == MIGRATIONS


_DEFINES = re.compile(r"^\s*CREATE (?:OR REPLACE )?FUNCTION (\w+)\(")


def test_the_live_functions_are_the_latest_migration_defining_each() -> None:
    latest: dict[str, str] = {}
    for version in sorted(MIGRATIONS):
        for statement in MIGRATIONS[version]:
            defined = _DEFINES.match(statement)
            if defined:
                latest[defined.group(1)] = statement
    assert latest == functions.LIVE


async def _snapshot(conn: Any, schema: str) -> dict[str, list[tuple[object, ...]]]:
    """What a schema holds, with its name taken out: columns, indexes, constraints, functions."""

    def plain(text: str) -> str:
        return text.replace(quote(schema), "<schema>").replace(schema, "<schema>")

    columns = await conn.fetch(
        "SELECT table_name, column_name, ordinal_position, data_type, is_nullable, "
        "column_default FROM information_schema.columns WHERE table_schema = $1 "
        "ORDER BY table_name, column_name",
        schema,
    )
    indexes = await conn.fetch(
        "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = $1 "
        "ORDER BY tablename, indexname",
        schema,
    )
    constraints = await conn.fetch(
        "SELECT c.conrelid::regclass::text AS tab, c.conname, pg_get_constraintdef(c.oid) AS def "
        "FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace "
        "WHERE n.nspname = $1 ORDER BY 1, 2",
        schema,
    )
    functions = await conn.fetch(
        "SELECT p.proname, pg_get_functiondef(p.oid) AS def FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY 1",
        schema,
    )
    return {
        "columns": [tuple(row) for row in columns],
        "indexes": [
            (row["tablename"], row["indexname"], plain(row["indexdef"])) for row in indexes
        ],
        "constraints": [(plain(row["tab"]), row["conname"], row["def"]) for row in constraints],
        "functions": [(row["proname"], plain(row["def"])) for row in functions],
    }


async def _at_version(conn: Any, schema: str, version: int) -> None:
    """Create ``schema`` as a runtime that knew migrations up to ``version`` left it."""
    async with conn.transaction():
        for statement in migration_statements(schema):
            await conn.execute(statement)
        await conn.execute(f"SET LOCAL search_path = {quote(schema)}")
        for target in (v for v in sorted(MIGRATIONS) if v <= version):
            for statement in MIGRATIONS[target]:
                await conn.execute(statement)
            await conn.execute(RECORD_VERSION, target)


@pytest.mark.parametrize("version", sorted(MIGRATIONS)[:-1])
async def test_a_schema_at_an_older_version_migrates_to_a_fresh_one(
    postgres_url: str, version: int
) -> None:
    fresh, old = fresh_schema(), fresh_schema()
    conn = await asyncpg.connect(PostgresWorld(postgres_url).dsn)
    try:
        async with PostgresWorld(with_schema(postgres_url, fresh)) as world:
            assert await world.migrate() == SCHEMA_VERSION
        await _at_version(conn, old, version)
        async with PostgresWorld(with_schema(postgres_url, old)) as world:
            assert (await world.info())["schema_version"] == SCHEMA_VERSION
        expected = await _snapshot(conn, fresh)
        assert expected["functions"] and expected["indexes"]
        assert await _snapshot(conn, old) == expected
    finally:
        for schema in (fresh, old):
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE")
        await conn.close()


async def test_the_reference_schema_is_what_the_migrations_build(postgres_url: str) -> None:
    fresh, reference = fresh_schema(), fresh_schema()
    conn = await asyncpg.connect(PostgresWorld(postgres_url).dsn)
    try:
        async with PostgresWorld(with_schema(postgres_url, fresh)) as world:
            await world.migrate()
        async with conn.transaction():
            await conn.execute(f"CREATE SCHEMA {quote(reference)}")
            await conn.execute(f"SET LOCAL search_path = {quote(reference)}")
            for statement in (*REFERENCE, *migration_statements(reference)):
                await conn.execute(statement)
        built, written = await _snapshot(conn, fresh), await _snapshot(conn, reference)
        del built["functions"], written["functions"]
        assert written == built
    finally:
        for schema in (fresh, reference):
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote(schema)} CASCADE")
        await conn.close()
