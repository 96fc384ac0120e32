"""Worlds under faults: a frozen server, a full disk, an unwritable place.

Driver errors reach callers as the ``worlds.errors`` tree, whose class alone
says whether waiting can help. The PostgreSQL tests freeze a server of their
own (SIGSTOP on every server process), so the session's server stays usable.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from tests import pg_server
from workflow import Worker, start, step, workflow
from worlds.errors import WorldFullError, WorldMisconfiguredError, WorldUnavailableError
from worlds.postgres import PostgresWorld
from worlds.semantics import new_run_id
from worlds.sqlite import SqliteWorld
from worlds.testing._base import WF, create_run, lease_all
from worlds.types import CommitRequest, CreateRunRequest, RunStarted, StepCreated, WorkItem

# Its module fixture (a PostgreSQL server of its own) is built once per worker that runs one of
# its tests, and again whenever that worker moves between modules: the group keeps the module on
# one worker, in a row (rfcs/0020-test-suite.md).
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("world_faults")]


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[str]:
    """A directory with a running PostgreSQL server that only this module uses."""
    directory = tempfile.mkdtemp(prefix="wf-pg-faults-")
    try:
        pg_server.start(directory)
    except (pg_server.ServerError, OSError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and no PostgreSQL server could be started: {exc}")
        pytest.skip(f"no PostgreSQL server could be started: {exc}")
    try:
        yield directory
    finally:
        pg_server.thaw(directory)
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


def _tcp_url(directory: str, **options: str) -> str:
    port = int((Path(directory) / "port").read_text())
    query = "&".join(f"{name}={value}" for name, value in options.items())
    return f"postgresql://postgres@127.0.0.1:{port}/postgres?{query}"


@pytest.mark.slow
async def test_a_frozen_postgres_server_is_noticed_and_left_behind(own_postgres: str) -> None:
    """Every operation on a frozen server fails as unavailable within seconds; once
    the server runs again the same world object works without being reopened."""
    url = _tcp_url(own_postgres, command_timeout="2", schema="frozen")
    async with PostgresWorld(url) as world:
        run = await create_run(world)
        pg_server.freeze(own_postgres)
        try:
            for operation in (
                lambda: world.get_run(run.id),
                lambda: lease_all(world, {WF}),
                lambda: create_run(world),
            ):
                with anyio.fail_after(20):  # detects a hang; the command timeout is 2 s
                    with pytest.raises(WorldUnavailableError, match="did not answer in time"):
                        await operation()
        finally:
            pg_server.thaw(own_postgres)
        with anyio.fail_after(30):
            while True:
                try:
                    found = await world.get_run(run.id)
                    break
                except WorldUnavailableError:
                    await anyio.sleep(0.2)
        assert found is not None and found.id == run.id
        assert [item.run_id for item in await lease_all(world, {WF})] == [run.id]


async def test_postgres_driver_errors_leave_as_world_errors(own_postgres: str) -> None:
    """A database that does not exist cannot heal by waiting; a server that refuses
    connections may: each is its ``WorldError`` class, the driver error its cause."""
    missing = _tcp_url(own_postgres).replace("/postgres?", "/no_such_database?")
    async with PostgresWorld(missing) as world:
        with pytest.raises(WorldMisconfiguredError, match="no_such_database") as raised:
            await world.info()
        assert type(raised.value.__cause__).__module__.startswith("asyncpg")
    port = pg_server._free_port()
    async with PostgresWorld(f"postgresql://postgres@127.0.0.1:{port}/postgres") as world:
        with pytest.raises(WorldUnavailableError) as refused:
            await world.get_run("run-1")
        assert isinstance(refused.value.__cause__, OSError)
        # the writes every backend inherits from the flows' base translate as well
        writes: list[Callable[[], Awaitable[object]]] = [
            lambda: world.cancel_run("run-1", None),
            lambda: world.pin_run("run-1", True),
            lambda: world.release_claim("k", "v"),
            lambda: world.prune_runs(datetime.now(UTC)),
        ]
        for write in writes:
            with pytest.raises(WorldUnavailableError):
                await write()


@step
async def pause(i: int) -> int:
    await anyio.sleep(0.2)
    return i


@workflow
async def paced(steps: int) -> int:
    total = 0
    for i in range(steps):
        total += await pause(i)
    return total


def _unavailable(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    return isinstance(exc, WorldUnavailableError) or "did not answer in time" in record.getMessage()


@pytest.mark.slow
async def test_a_worker_reports_a_frozen_server_and_carries_on(
    own_postgres: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose server freezes logs it as unavailable within seconds, and
    finishes its runs once the server runs again."""
    url = _tcp_url(own_postgres, command_timeout="2", schema="frozen_worker")
    caplog.set_level(logging.WARNING)
    async with PostgresWorld(url) as world, Worker(world, [paced], lease_seconds=3):
        run = await start(paced, 20, world=world)
        await anyio.sleep(0.5)
        pg_server.freeze(own_postgres)
        frozen_at = time.monotonic()
        try:
            with anyio.fail_after(15):  # the command timeout is 2 s
                while not any(_unavailable(record) for record in caplog.records):
                    await anyio.sleep(0.1)
            reported_after = time.monotonic() - frozen_at
        finally:
            pg_server.thaw(own_postgres)
        assert reported_after < 15
        assert await run.result(timeout=60) == sum(range(20))


@pytest.mark.slow
async def test_a_worker_started_while_its_server_is_down_waits_for_it(
    own_postgres: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Found by the chaos suite under load: a worker entered while PostgreSQL was
    restarting died on its first world call (the codec check) instead of riding
    the outage out like its loops; it now waits and then serves."""
    url = _tcp_url(own_postgres, schema="started_down")
    caplog.set_level(logging.WARNING)

    async def start_server_once_refused() -> None:
        with anyio.fail_after(30):
            while not any(_unavailable(record) for record in caplog.records):
                await anyio.sleep(0.1)
        await anyio.to_thread.run_sync(pg_server.start_again, own_postgres)

    pg_server.stop(own_postgres)
    try:
        async with PostgresWorld(url) as world, anyio.create_task_group() as group:
            group.start_soon(start_server_once_refused)
            with anyio.fail_after(60):
                async with Worker(world, [paced], lease_seconds=3):
                    run = await start(paced, 3, world=world)
                    assert await run.result(timeout=60) == sum(range(3))
    finally:
        if not (Path(own_postgres) / "data" / "postmaster.pid").exists():
            pg_server.start_again(own_postgres)


@pytest.mark.parametrize("inline", ["1", "0"])
async def test_a_full_sqlite_world_raises_world_full_and_stays_whole(
    tmp_path: Path, inline: str
) -> None:
    """Out of room (``max_pages``), a write raises ``WorldFullError`` and writes nothing
    of itself; what was written before stays, the file passes ``integrity_check``,
    and reads still work."""
    path = tmp_path / "world.db"
    url = f"sqlite:///{path}?max_pages=60&inline={inline}"
    created: list[str] = []
    async with SqliteWorld(url) as world:
        with pytest.raises(WorldFullError, match="full") as raised:
            for _ in range(200):
                request = _big_run()
                created.append(request.run_id)
                await world.create_run(request)
        refused = created.pop()
        assert isinstance(raised.value.__cause__, sqlite3.Error)
        assert len(created) >= 3, "the world filled up before it held anything"
        assert await world.get_run(refused) is None
        assert await world.read_events(refused) == []
        for run_id in created:
            assert [type(e).__name__ for e in await world.read_events(run_id)] == ["RunCreated"]
        # a commit that does not fit leaves the run's log as it was
        run_id = created[0]
        item = (await lease_all(world, {WF}))[0]
        with pytest.raises(WorldFullError):
            await world.commit(
                CommitRequest(
                    run_id=item.run_id,
                    worker_id="probe",
                    lease=item,
                    events=(RunStarted(), StepCreated(step=1, name="s", args=b"x" * 300_000)),
                )
            )
        assert len(await world.read_events(item.run_id)) == 1
        assert (await world.get_run(run_id)) is not None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (len(created),)


def _big_run() -> CreateRunRequest:
    return CreateRunRequest(run_id=new_run_id(), workflow=WF, args=b"x" * 20_000)


async def test_an_unopenable_sqlite_place_is_one_error(tmp_path: Path) -> None:
    """A directory as the world's file, or a file in its directory's place: one
    ``WorldMisconfiguredError`` that names the place, and no traceback from the
    driver's thread after the event loop closed."""
    a_file = tmp_path / "file"
    a_file.write_text("")
    for place, reason in ((tmp_path, "cannot open"), (a_file / "world.db", "cannot create")):
        done = subprocess.run(
            [sys.executable, "-c", _OPEN_ONCE, f"sqlite:///{place}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 3, done.stderr
        assert done.stdout.splitlines() == [f"WorldMisconfiguredError {reason}"]
        assert "Event loop is closed" not in done.stderr
        assert "Traceback" not in done.stderr, done.stderr


_OPEN_ONCE = """
import asyncio, sys
from worlds import open as open_world
from worlds.errors import WorldError

async def main() -> None:
    async with open_world(sys.argv[1]) as world:
        await world.info()

try:
    asyncio.run(main())
except WorldError as exc:
    print(type(exc).__name__, " ".join(str(exc).split()[:2]))
    sys.exit(3)
"""


async def _lease_when_up(world: PostgresWorld, worker: str, lease_seconds: float) -> list[WorkItem]:
    """Lease (one item at most) as soon as the restarted server answers."""
    with anyio.fail_after(60):
        while True:
            try:
                return await world.lease(worker, names=[WF], limit=1, lease_seconds=lease_seconds)
            except WorldUnavailableError:
                await anyio.sleep(0.05)


@pytest.mark.slow
async def test_after_a_server_restart_no_lease_is_taken_over_before_its_holder_can_answer(
    own_postgres: str,
) -> None:
    """Issue 11: a server restart outlasting a lease used to hand the lease to the
    first worker that reconnected, so the holder's finished work was refused and
    done again. The server's downtime does not count: for one lease length after
    the server starts, no expired lease is taken over; after that, one is."""
    url = _tcp_url(own_postgres)
    async with PostgresWorld(url) as holder, PostgresWorld(url) as thief:
        run = await create_run(holder, workflow=WF)
        (held,) = await holder.lease("holder", names=[WF], limit=1, lease_seconds=1.0)
        await anyio.sleep(1.2)  # expired, and nobody took it yet
        await anyio.to_thread.run_sync(pg_server.restart, own_postgres, "immediate")
        assert await _lease_when_up(thief, "thief", lease_seconds=4.0) == []
        done = await holder.commit(
            CommitRequest(
                run_id=run.id, worker_id="holder", lease=held, events=(RunStarted(),), ack=False
            )
        )
        assert done.ok and not done.lease_lost
        await anyio.sleep(4.5)  # one lease length (at most 5 s) after the server started
        (taken,) = await _lease_when_up(thief, "thief", lease_seconds=4.0)
        assert taken.id == held.id and taken.token != held.token
