"""The SQLite world's frozen migrations lead every older file to today's schema.

A file is built at each older version by applying ``MIGRATIONS[1..k]``, then
opened by the world, which migrates it; its schema (``sqlite_master``, with
whitespace and identifier quoting normalised) must equal a new file's, which
is created from ``worlds.sqlite.schema.SCHEMA``.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from worlds.semantics import new_run_id
from worlds.sqlite import SqliteWorld
from worlds.sqlite.migrations import MIGRATIONS
from worlds.sqlite.schema import SCHEMA_VERSION
from worlds.types import CreateRunRequest

Schema = list[tuple[str, str, str, str | None]]


def _normalised(sql: str | None) -> str | None:
    if sql is None:
        return None
    return re.sub(r"\s+", " ", sql.replace('"', "")).replace("( ", "(").replace(" )", ")").strip()


def _schema(path: Path) -> tuple[int, Schema]:
    db = sqlite3.connect(path)
    try:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    finally:
        db.close()
    return version, sorted((kind, name, table, _normalised(sql)) for kind, name, table, sql in rows)


def _file_at(path: Path, version: int) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN")
        for produced in range(1, version + 1):
            for statement in MIGRATIONS[produced]:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
        db.execute("COMMIT")
    finally:
        db.close()


def test_migrations_are_numbered_by_the_version_they_produce() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
    assert all(isinstance(s, str) for statements in MIGRATIONS.values() for s in statements)


@pytest.mark.anyio
@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
async def test_a_file_at_every_older_version_migrates_to_the_fresh_schema(
    tmp_path: Path, version: int
) -> None:
    fresh = tmp_path / "fresh.db"
    async with SqliteWorld(f"sqlite:///{fresh}") as world:
        assert await world.migrate() == SCHEMA_VERSION
    old = tmp_path / "old.db"
    _file_at(old, version)
    async with SqliteWorld(f"sqlite:///{old}", create=False) as world:
        assert await world.migrate() == SCHEMA_VERSION
        request = CreateRunRequest(
            run_id=new_run_id(),
            workflow="wf",
            args=b"",
            attributes={"order": "o-1"},
            unique=frozenset({"order"}),
        )
        created = await world.create_run(request)
        assert created.run is not None
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.run_id == created.run.id
    assert _schema(old) == _schema(fresh)
    assert _schema(old)[0] == SCHEMA_VERSION
