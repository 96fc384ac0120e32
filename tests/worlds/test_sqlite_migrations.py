"""The SQLite world's frozen migrations lead every older file to today's schema.

A file is built at each older version by applying ``MIGRATIONS[1..k]``, then
opened by the world, which migrates it; its schema (``sqlite_master``, with
whitespace and identifier quoting normalised) must equal a new file's, which
is created from ``worlds.sqlite.schema.SCHEMA``.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

from tests.worlds.migration_modules import versions_by_module
from worlds.semantics import new_run_id
from worlds.sqlite import SqliteWorld
from worlds.sqlite import migrations as migrations_package
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
        for produced in (v for v in sorted(MIGRATIONS) if v <= version):
            for statement in MIGRATIONS[produced]:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
        db.execute("COMMIT")
    finally:
        db.close()


FROZEN = {
    1: "6fb7e4ada75d536eac772aac160b006e16a64368632a158715a501a5c193de65",
    2: "7008e93c13211c10cdd5c45c4c2366fe00a4fbb86004438b2d64ae5beb5ddd89",
    3: "2b9f8738eeec29ac1acc9c0d941afa876507437b64e6efb343355848db372481",
    4: "effb91644791c1d2941cf0d7e5aa9b5af72a2d2ad5b9203db4bf636c3ed890d4",
    5: "b84ddb7dc7db30604b465f7e84378809692b2952dc44f561462fd5bb3d2efecd",
    6: "317334b7ee35c4364b33782d06b88ace4103f0176e239000524ea906a2fdd4d8",
    7: "14942edf15393f45d00241582eb5aa46af302f60c1335abb1ca388583107f2df",
    8: "04fcbc7e55b2ba23dbf54f0b0bff8e0505fd503e5dafbddf9b37e2336663d795",
    9: "e62bfd99479b63e774790baa1968fe3b49a2824e0cc0325b003007c442d5d077",
    10: "9a1a42c9847997b1ce41852ec0b251c5be3088d7d2529fe138f5c4a764aac73e",
    11: "16fc0a0da74f1ba8437aa64e8f796433fa3a28487ca90cdd82c50023c36a7f08",
    12: "1dc60a572f59e7d303298a284286e404ffa3f71507987731bef74ee6ee763a3a",
    13: "e24f20db7e259e78d46f895478ea9ef190fa32118ab18c7015fd7d6cfd73f4e3",
    14: "e95a82edf50b8991c507367973b5e6fef8028e0e015fb392f428d9f31ab482a3",
    15: "9e329cf1be6ac26c960005553068ff4f9c0f4458d0053a2a5f3c1c88a72c802d",
    16: "cbb942437c337b7e6dba7670c17f51f9ab42087137d17792fbfa6137004f713c",
    17: "326a2186ffddd4f3cecdefa0a596e2933a94f302a1189fbd56fa3aa394510207",
}
"""sha256 of each migration's statements: a file at version v ran exactly these."""


def test_migrations_are_numbered_by_the_version_they_produce() -> None:
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
    assert all(isinstance(s, str) for statements in MIGRATIONS.values() for s in statements)


def test_migrations_are_frozen() -> None:
    digests = {
        version: hashlib.sha256("\x00".join(statements).encode()).hexdigest()
        for version, statements in MIGRATIONS.items()
    }
    assert digests == FROZEN


def test_each_version_is_a_module_that_says_what_and_why() -> None:
    assert versions_by_module(migrations_package) == MIGRATIONS


@pytest.mark.anyio
@pytest.mark.parametrize("version", sorted(MIGRATIONS))
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
