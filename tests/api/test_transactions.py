"""Transaction steps (``@transaction``): a step's writes and its result commit together.

On SQLite and PostgreSQL the function's statements and the step's recorded
outcome are one transaction of the world's own database; an exception rolls
both back; two runs that conflict over one row are both applied once; the
memory world refuses transaction steps in one line naming the worlds that
run them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import msgspec
import pytest

import worlds
from tests.conftest import drop_schema, fresh_schema, patient, with_schema
from workflow import (
    FatalError,
    NotInWorkflowError,
    RetryableError,
    RunFailedError,
    Worker,
    get_step_metadata,
    get_transaction,
    start,
    step,
    transaction,
    workflow,
)
from worlds.protocol import World
from worlds.types import StepCompleted, StepRetrying

pytestmark = pytest.mark.anyio

CALLS: list[tuple[str, int]] = []
"""(what, attempt) for every call of the functions below, in this process."""


def param(kind: str) -> str:
    """The parameter marker of statement ``n`` (1-based) in ``kind``'s style."""
    return "?" if kind == "sqlite" else "$"


def q(kind: str, sql: str) -> str:
    """``sql`` written with ``?`` markers, in the world's own parameter style."""
    if kind == "sqlite":
        return sql
    parts = sql.split("?")
    return "".join(f"{part}${n}" if n < len(parts) else part for n, part in enumerate(parts, 1))


def kind_of() -> str:
    raw = get_transaction().raw
    return "sqlite" if isinstance(raw, sqlite3.Connection) else "postgres"


@transaction
async def debit(account: str, amount: int) -> int:
    tx = get_transaction()
    kind = kind_of()
    CALLS.append(("debit", get_step_metadata().attempt))
    await tx.execute(
        q(kind, "UPDATE accounts SET balance = balance - ? WHERE id = ?"), amount, account
    )
    rows = await tx.execute(q(kind, "SELECT balance FROM accounts WHERE id = ?"), account)
    return int(rows[0][0])


@workflow
async def pay(account: str, amounts: list[int]) -> list[int]:
    return [await debit(account, amount) for amount in amounts]


@transaction(max_retries=2, retry_delay=0.0)
async def insert_then_fail(note: str) -> str:
    tx = get_transaction()
    attempt = get_step_metadata().attempt
    CALLS.append(("insert_then_fail", attempt))
    await tx.execute(q(kind_of(), "INSERT INTO notes (note) VALUES (?)"), f"{note}-{attempt}")
    if attempt == 1:
        raise RetryableError("the first attempt fails after its write", retry_after=0.0)
    return f"{note}-{attempt}"


@workflow
async def noted(note: str) -> str:
    return await insert_then_fail(note)


@transaction
async def insert_then_give_up(note: str) -> str:
    await get_transaction().execute(q(kind_of(), "INSERT INTO notes (note) VALUES (?)"), note)
    raise FatalError("nothing of this may stay")


@workflow
async def given_up(note: str) -> str:
    return await insert_then_give_up(note)


@transaction
async def read_then_write(account: str, wait: float) -> int:
    """Read, wait (so another run reads the same row), write what was read minus one."""
    tx = get_transaction()
    kind = kind_of()
    CALLS.append(("read_then_write", get_step_metadata().attempt))
    (balance,) = (await tx.execute(q(kind, "SELECT balance FROM accounts WHERE id = ?"), account))[
        0
    ]
    await anyio.sleep(wait)
    await tx.execute(q(kind, "UPDATE accounts SET balance = ? WHERE id = ?"), balance - 1, account)
    return int(balance) - 1


@workflow
async def decrement(account: str, wait: float) -> int:
    return await read_then_write(account, wait)


@step
async def plain() -> str:
    get_transaction()
    return "unreachable"


@workflow
async def plain_asks() -> str:
    return await plain()


# ------------------------------------------------------------------ databases


class Database:
    """The world's database, read and written by the test directly."""

    def __init__(self, kind: str, url: str, path: Path | None) -> None:
        self.kind, self.url, self.path = kind, url, path

    async def run(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            assert self.path is not None
            db = sqlite3.connect(self.path, isolation_level=None)
            try:
                return [tuple(r) for r in db.execute(sql, params).fetchall()]
            finally:
                db.close()
        world = worlds.open(self.url)
        dsn, schema = world.dsn, world.schema  # type: ignore[attr-defined]
        conn = await asyncpg.connect(dsn, server_settings={"search_path": f'"{schema}"'})
        try:
            return [tuple(r) for r in await conn.fetch(q("postgres", sql), *params)]
        finally:
            await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def world_url_for(db_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if db_kind == "sqlite":
        yield f"sqlite:///{tmp_path}/world.db"
        return
    server = str(request.getfixturevalue("postgres_url"))
    url = patient(with_schema(server, fresh_schema()))
    yield url
    drop_schema(url)


@pytest.fixture
async def setup(
    db_kind: str, world_url_for: str, tmp_path: Path
) -> AsyncIterator[tuple[World, Database]]:
    world = worlds.open(world_url_for)
    async with world:
        await world.migrate()  # the schema (and the file) exist before the app's tables
        database = Database(db_kind, world_url_for, tmp_path / "world.db")
        await database.run("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER NOT NULL)")
        await database.run("CREATE TABLE notes (note TEXT NOT NULL)")
        await database.run("INSERT INTO accounts VALUES (?, ?)", "alice", 100)
        CALLS.clear()
        yield world, database


# ------------------------------------------------------------------ tests


async def test_the_writes_commit_with_the_result(setup: tuple[World, Database]) -> None:
    world, database = setup
    async with Worker(world, [pay]):
        run = await start(pay, "alice", [10, 20, 5], world=world)
        assert await run.result(timeout=60) == [90, 70, 65]
    assert await database.run("SELECT balance FROM accounts WHERE id = ?", "alice") == [(65,)]
    events = await world.read_events(run.id)
    assert [e.step for e in events if isinstance(e, StepCompleted)] == [1, 2, 3]


async def test_a_transaction_step_records_the_workers_build(
    setup: tuple[World, Database],
) -> None:
    """Like an ordinary step's, each ``StepCompleted`` names the build that ran it
    (RFC 0025), whether it committed with the workflow's next commands or alone."""
    world, database = setup
    async with Worker(world, [pay], build_id="b-7"):
        run = await start(pay, "alice", [1, 2], world=world)
        assert await run.result(timeout=60) == [99, 97]
    assert await database.run("SELECT balance FROM accounts WHERE id = ?", "alice") == [(97,)]
    events = await world.read_events(run.id)
    assert [e.build_id for e in events if isinstance(e, StepCompleted)] == ["b-7", "b-7"]


async def test_a_raise_rolls_the_writes_back_and_the_step_is_retried(
    setup: tuple[World, Database],
) -> None:
    world, database = setup
    async with Worker(world, [noted]):
        run = await start(noted, "n", world=world)
        assert await run.result(timeout=60) == "n-2"
    assert await database.run("SELECT note FROM notes") == [("n-2",)]
    assert CALLS == [("insert_then_fail", 1), ("insert_then_fail", 2)]
    events = await world.read_events(run.id)
    assert [type(e) for e in events if isinstance(e, (StepRetrying, StepCompleted))] == [
        StepRetrying,
        StepCompleted,
    ]


async def test_a_step_that_fails_for_good_leaves_nothing(setup: tuple[World, Database]) -> None:
    world, database = setup
    async with Worker(world, [given_up]):
        run = await start(given_up, "gone", world=world)
        with pytest.raises(Exception, match="nothing of this may stay"):
            await run.result(timeout=60)
    assert await database.run("SELECT note FROM notes") == []


async def test_two_runs_over_one_row_both_apply_once(
    db_kind: str, setup: tuple[World, Database]
) -> None:
    """Both read the balance and write it back minus one: on PostgreSQL the second
    to write loses a serialization race and runs again (not a new attempt); on
    SQLite the second waits for the first. Either way both decrements land."""
    world, database = setup
    async with Worker(world, [decrement], concurrency=4):
        runs = [await start(decrement, "alice", 0.3, world=world) for _ in range(2)]
        results = sorted([await run.result(timeout=60) for run in runs])
    assert results == [98, 99]
    assert await database.run("SELECT balance FROM accounts WHERE id = ?", "alice") == [(98,)]
    calls = [c for c in CALLS if c[0] == "read_then_write"]
    assert all(attempt == 1 for _, attempt in calls), "a conflict is not an attempt"
    if db_kind == "postgres":
        assert len(calls) >= 3, "the loser of the race ran its function again"
    for run in runs:
        events = await world.read_events(run.id)
        assert not any(isinstance(e, StepRetrying) for e in events)


async def test_get_transaction_outside_a_transaction_step_is_refused(
    setup: tuple[World, Database],
) -> None:
    world, _ = setup
    async with Worker(world, [plain_asks]):
        run = await start(plain_asks, world=world)
        with pytest.raises(RunFailedError, match=r"get_transaction\(\) works inside"):
            await run.result(timeout=60)
    with pytest.raises(NotInWorkflowError):
        get_transaction()


async def test_the_memory_world_refuses_in_one_line() -> None:
    world = worlds.open("memory://")
    async with world, Worker(world, [pay]):
        run = await start(pay, "alice", [1], world=world)
        with pytest.raises(RunFailedError) as raised:
            await run.result(timeout=60)
    message = str(raised.value)
    assert "memory world cannot run @transaction steps" in message
    assert "sqlite://" in message and "postgresql://" in message


def test_bad_options_are_refused_at_the_decorator() -> None:
    with pytest.raises(ValueError, match="isolation must be one of"):
        transaction(isolation="snapshot")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="async def"):
        not_async: Any = lambda: None  # noqa: E731 - a plain function, refused
        transaction(not_async)


# ------------------------------------------------------------------ application database

APP_DATABASE = "postgresql://replaced-per-test/db"
"""The decorator needs a URL at import; each test points ``app_debit.database`` at
the fresh database it made."""


@transaction(database=APP_DATABASE, max_retries=1, retry_delay=0.0)
async def app_debit(account: str, amount: int) -> int:
    tx = get_transaction()
    CALLS.append(("app_debit", get_step_metadata().attempt))
    await tx.execute("UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, account)
    rows = await tx.execute("SELECT balance FROM accounts WHERE id = $1", account)
    if amount < 0:
        raise FatalError("no negative debits")
    return int(rows[0][0])


@workflow
async def app_pay(account: str, amounts: list[int]) -> list[int]:
    return [await app_debit(account, amount) for amount in amounts]


@pytest.fixture
async def app_db(app_database: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    monkeypatch.setattr(app_debit, "database", app_database)
    conn = await asyncpg.connect(app_database)
    try:
        await conn.execute("CREATE TABLE accounts (id TEXT PRIMARY KEY, balance INTEGER)")
        await conn.execute("INSERT INTO accounts VALUES ('bob', 100)")
    finally:
        await conn.close()
    CALLS.clear()
    yield app_database


async def _app_rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(sql, *params)]
    finally:
        await conn.close()


@pytest.mark.parametrize("world_kind", ["memory", "sqlite"])
async def test_an_application_database_records_each_output_with_its_writes(
    app_db: str, world_kind: str, tmp_path: Path
) -> None:
    """Any world, the memory world too: the writes and the output are one
    transaction of the application database, the log gets the output after."""
    world = worlds.open("memory://" if world_kind == "memory" else f"sqlite:///{tmp_path}/w.db")
    async with world, Worker(world, [app_pay]):
        run = await start(app_pay, "bob", [10, 5], world=world)
        assert await run.result(timeout=60) == [90, 85]
        failed = await start(app_pay, "bob", [1, -1], world=world)
        with pytest.raises(RunFailedError, match="no negative debits"):
            await failed.result(timeout=60)
    assert await _app_rows(app_db, "SELECT balance FROM accounts") == [(84,)]
    recorded = await _app_rows(
        app_db, "SELECT run_id, step FROM workflow_transaction_outputs ORDER BY run_id, step"
    )
    assert recorded == sorted([(run.id, 1), (run.id, 2), (failed.id, 1)])


async def test_an_output_recorded_before_a_crash_is_copied_not_run_again(app_db: str) -> None:
    """A worker that died after the application database committed, before the log
    did: the next attempt finds the output and copies it; the function does not run."""
    world = worlds.open("memory://")
    async with world:
        run = await start(app_pay, "bob", [10], world=world)
        await _app_rows(
            app_db,
            "CREATE TABLE IF NOT EXISTS workflow_transaction_outputs (run_id TEXT NOT NULL,"
            " step INTEGER NOT NULL, output BYTEA NOT NULL, recorded_at TIMESTAMPTZ NOT NULL"
            " DEFAULT now(), PRIMARY KEY (run_id, step))",
        )
        await _app_rows(
            app_db,
            "INSERT INTO workflow_transaction_outputs (run_id, step, output) VALUES ($1, 1, $2)",
            run.id,
            msgspec.msgpack.encode(77),
        )
        async with Worker(world, [app_pay]):
            assert await run.result(timeout=60) == [77]
    assert CALLS == []
    assert await _app_rows(app_db, "SELECT balance FROM accounts") == [(100,)]


async def test_an_application_database_step_records_the_workers_build(app_db: str) -> None:
    """Run or copied from a recorded output, the step's ``StepCompleted`` names the
    build of the worker that committed it to the log."""
    world = worlds.open("memory://")
    async with world, Worker(world, [app_pay], build_id="b-8"):
        run = await start(app_pay, "bob", [10], world=world)
        assert await run.result(timeout=60) == [90]
    events = await world.read_events(run.id)
    assert [e.build_id for e in events if isinstance(e, StepCompleted)] == ["b-8"]


def test_an_application_database_must_be_postgresql() -> None:
    with pytest.raises(ValueError, match="PostgreSQL URL"):
        transaction(database="sqlite:///app.db")
