"""PostgreSQL failover: a standby's answers, a promoted standby found.

Issue 25, item 2 (bad multi-host URLs are in ``tests/cli/test_cli_inputs.py``).
A real primary and a streaming standby (``pg_server.start_pair``: ``initdb``
then ``pg_basebackup``, synchronous replication) stand in for a Patroni or RDS
Multi-AZ pair; the primary is crashed with ``pg_ctl stop -m immediate`` and the
standby promoted with ``pg_ctl promote``. Workers under load through a failover
are the chaos suite's ``failover`` scenario (``tests/system/test_chaos.py``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import anyio
import asyncpg
import pytest

import worlds
from tests import pg_server
from workflow import AttributeConflictError, Unique, Worker, start, step, workflow
from worlds.errors import WorldUnavailableError, as_world_error

T = TypeVar("T")


@pytest.fixture
def pair() -> Iterator[pg_server.PgPair]:
    """A primary and its synchronous standby that only this test uses (it may fail one)."""
    directory = tempfile.mkdtemp(prefix="wf-pg-pair-")
    try:
        started = pg_server.start_pair(directory)
    except (pg_server.ServerError, OSError) as exc:
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and no PostgreSQL pair could be started: {exc}")
        pytest.skip(f"no PostgreSQL pair could be started: {exc}")
    try:
        yield started
    finally:
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


@workflow
async def claimer(order: str) -> str:
    return order


@step
async def double(x: int) -> int:
    return 2 * x


@workflow
async def doubled(x: int) -> int:
    return await double(x)


def _only(server: pg_server.PgServer) -> str:
    return f"postgresql://postgres@127.0.0.1:{server.port}/postgres"


async def _until_written(call: Callable[[], Awaitable[T]], within: float = 60.0) -> T:
    """``await call()`` again while the world is unavailable (a failover under way)."""
    with anyio.fail_after(within):
        while True:
            try:
                return await call()
            except WorldUnavailableError:
                await anyio.sleep(0.1)


@pytest.mark.anyio
async def test_a_multi_host_url_writes_to_the_primary_whichever_host_comes_first(
    pair: pg_server.PgPair,
) -> None:
    standby_first = (
        f"postgresql://postgres@127.0.0.1:{pair.standby.port},"
        f"127.0.0.1:{pair.primary.port}/postgres"
    )
    async with worlds.open(standby_first) as world:
        run = await start(claimer, "o-1", attributes={"order": Unique("o-1")}, world=world)
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.run_id == run.id
    async with worlds.open(_only(pair.primary)) as primary:
        assert await primary.get_run(run.id) is not None


@pytest.mark.anyio
async def test_a_standby_is_an_outage_and_the_same_world_writes_once_it_is_promoted(
    pair: pg_server.PgPair,
) -> None:
    """A URL that leads to a standby only: writes fail as unavailable (not
    misconfigured, so workers wait); after the failover the same world object
    writes, and what the old primary acknowledged is on the new one."""
    async with worlds.open(pair.url) as world:
        await start(claimer, "o-1", attributes={"order": Unique("o-1")}, world=world)
    async with worlds.open(_only(pair.standby)) as world:
        with pytest.raises(WorldUnavailableError, match="read-only") as raised:
            await start(claimer, "o-2", attributes={"order": Unique("o-2")}, world=world)
        assert "primary" in str(raised.value)
        conn = await asyncpg.connect(_only(pair.standby))
        try:
            with pytest.raises(asyncpg.PostgresError, match="recovery is in progress") as caught:
                await conn.fetchval("SELECT pg_current_wal_lsn()")
        finally:
            await conn.close()
        assert isinstance(as_world_error(caught.value), WorldUnavailableError)
        wanting_a_primary = f"{_only(pair.standby)}?target_session_attrs=read-write"
        async with worlds.open(wanting_a_primary) as other:
            with pytest.raises(WorldUnavailableError, match="target attribute"):
                await other.get_run("no-such-run")  # no host accepts writes (yet)
        await anyio.to_thread.run_sync(pg_server.kill, pair.primary.directory)
        await anyio.to_thread.run_sync(pg_server.promote, pair.standby.directory)

        with pytest.raises(AttributeConflictError):  # the acknowledged claim survived
            await _until_written(
                lambda: start(claimer, "o-1", attributes={"order": Unique("o-1")}, world=world)
            )
        after = await _until_written(
            lambda: start(claimer, "o-2", attributes={"order": Unique("o-2")}, world=world)
        )
        assert await world.get_run(after.id) is not None


@pytest.mark.anyio
async def test_a_worker_on_a_multi_host_url_carries_on_on_the_promoted_standby(
    pair: pg_server.PgPair,
) -> None:
    """One worker process object, never restarted: runs started before the crash
    and after the promotion all complete, with their results."""
    async with worlds.open(pair.url) as world, Worker(world, [doubled]):
        first = [await start(doubled, i, world=world) for i in range(5)]
        assert [await run.result(30) for run in first] == [2 * i for i in range(5)]
        await anyio.to_thread.run_sync(pg_server.kill, pair.primary.directory)
        await anyio.to_thread.run_sync(pg_server.promote, pair.standby.directory)
        later = []
        for i in range(5, 10):
            later.append(await _until_written(lambda i=i: start(doubled, i, world=world)))  # type: ignore[misc]
        assert [await _until_written(lambda run=run: run.result(30)) for run in later] == [  # type: ignore[misc]
            2 * i for i in range(5, 10)
        ]
        assert [await run.result(5) for run in first] == [2 * i for i in range(5)]


@pytest.mark.anyio
async def test_after_a_read_only_answer_the_world_looks_for_the_primary_again(
    pair: pg_server.PgPair,
) -> None:
    """A failover manager fences the old primary read-only (it stays up) and promotes
    the standby: the world's pooled connections to the fenced primary are replaced,
    and the next writes go to the new primary."""
    async with worlds.open(pair.url) as world:
        await start(claimer, "o-1", attributes={"order": Unique("o-1")}, world=world)
        old = await asyncpg.connect(_only(pair.primary))
        try:
            await old.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            await old.execute("SELECT pg_reload_conf()")
        finally:
            await old.close()
        await anyio.to_thread.run_sync(pg_server.promote, pair.standby.directory)
        with pytest.raises(WorldUnavailableError, match="read-only"):
            for _ in range(50):  # until the reload reached the pooled sessions
                await start(claimer, "o-2", world=world)
                await anyio.sleep(0.1)
        run = await _until_written(lambda: start(claimer, "o-3", world=world), within=30)
    async with worlds.open(_only(pair.standby)) as promoted:
        assert await promoted.get_run(run.id) is not None
