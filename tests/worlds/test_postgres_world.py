"""What only the PostgreSQL world has: migrations, schemas, notifications, many processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import anyio
import anyio.to_thread
import asyncpg
import pytest

from tests.conftest import drop_schema, fresh_schema, with_schema
from tests.system.test_crash import crash_and_recover
from workflow import AttributeConflictError, Unique, start, workflow
from worlds.errors import WorldMisconfiguredError
from worlds.postgres import PostgresWorld, migrations
from worlds.postgres import schema as pg_schema
from worlds.postgres.migrations import MIGRATIONS
from worlds.protocol import WORK_TOPIC
from worlds.types import CreateRunRequest

pytestmark = pytest.mark.anyio

PROCESSES = 4


@workflow
async def idle(tag: str = "") -> str:
    return tag


def _run_in_process(coroutine_function: object, *args: object) -> object:
    return asyncio.run(coroutine_function(*args))  # type: ignore[operator]


async def _create_runs(url: str, count: int) -> list[str]:
    async with PostgresWorld(url) as world:
        ids = []
        for n in range(count):
            request = CreateRunRequest(run_id=f"run-{n:04d}", workflow="wf", args=b"")
            assert (await world.create_run(request)).run is not None
            ids.append(request.run_id)
        return ids


async def _meet(gate: str) -> None:
    """Wait at ``gate`` (a directory) until all ``PROCESSES`` processes are there.

    A start time fixed in advance was missed under load by a process still starting
    up, which then found the queue drained by the others.
    """
    Path(gate, str(os.getpid())).touch()
    with anyio.fail_after(120):
        while len(os.listdir(gate)) < PROCESSES:
            await anyio.sleep(0.01)


async def _lease_until_empty(url: str, gate: str) -> list[tuple[str, int]]:
    """Lease small batches until the queue stays empty; the (id, token) pairs leased."""
    async with PostgresWorld(url) as world:
        await world.migrate()
        await _meet(gate)
        leased: list[tuple[str, int]] = []
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 1.0:
            items = await world.lease("w", names={"wf"}, limit=3, lease_seconds=120.0)
            leased += [(item.id, item.token) for item in items]
            if items:
                idle_since = time.monotonic()
        return leased


async def _contend(url: str, gate: str, count: int) -> list[str]:
    """Start ``count`` runs claiming one unique order concurrently; describe each outcome."""
    async with PostgresWorld(url) as world:
        await world.migrate()
        await _meet(gate)
        outcomes: list[str] = []

        async def one() -> None:
            try:
                run = await start(idle, attributes={"order": Unique("o-50")}, world=world)
                outcomes.append(f"run {run.id}")
            except AttributeConflictError as exc:
                outcomes.append(f"conflict {exc.existing_run_id}")

        async with anyio.create_task_group() as group:
            for _ in range(count):
                group.start_soon(one)
        return outcomes


def _in_processes(jobs: list[tuple[object, ...]]) -> list[object]:
    with ProcessPoolExecutor(len(jobs), mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_run_in_process, *job) for job in jobs]
        return [future.result(timeout=120) for future in futures]


async def test_migrations_are_idempotent_and_safe_concurrently(postgres_world_url: str) -> None:
    worlds = [PostgresWorld(postgres_world_url) for _ in range(6)]
    try:
        versions = await asyncio.gather(*(world.migrate() for world in worlds))
        assert versions == [pg_schema.SCHEMA_VERSION] * 6
        assert await worlds[0].migrate() == pg_schema.SCHEMA_VERSION
        info = await worlds[0].info()
        assert info["scheme"] == "postgresql" and info["schema_version"] == pg_schema.SCHEMA_VERSION
    finally:
        for world in worlds:
            await world.close()
    conn = await asyncpg.connect(worlds[0].dsn)
    try:
        applied = await conn.fetch(
            f"SELECT version FROM {pg_schema.quote(worlds[0].schema)}.schema_migrations ORDER BY 1"
        )
        assert [row[0] for row in applied] == sorted(MIGRATIONS)
    finally:
        await conn.close()


async def test_the_world_leaves_the_servers_durability_settings_alone(
    postgres_world_url: str,
) -> None:
    """Whatever ``fsync`` and ``synchronous_commit`` the server runs with, the world's
    sessions run with the same: it never weakens (or otherwise changes) them."""
    world = PostgresWorld(postgres_world_url)
    try:
        await world.create_run(CreateRunRequest(run_id="r-durable", workflow="w", args=b""))
        info = await world.info()
    finally:
        await world.close()
    conn = await asyncpg.connect(world.dsn)
    try:
        server = {
            name: await conn.fetchval(f"SHOW {name}") for name in ("fsync", "synchronous_commit")
        }
    finally:
        await conn.close()
    assert {name: info[name] for name in server} == server


async def test_an_older_schema_is_migrated_and_a_newer_one_refused(postgres_url: str) -> None:
    schema = fresh_schema()
    url = with_schema(postgres_url, schema)
    dsn = PostgresWorld(url).dsn
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        for statement in (*pg_schema.migration_statements(schema), *migrations.MIGRATIONS[1]):
            await conn.execute(statement)
        await conn.execute(pg_schema.RECORD_VERSION, 1)
        async with PostgresWorld(url) as world:
            assert (await world.info())["schema_version"] == pg_schema.SCHEMA_VERSION
            assert await world.list_hooks() == []
        await conn.execute(pg_schema.RECORD_VERSION, pg_schema.SCHEMA_VERSION + 1)
        async with PostgresWorld(url) as world:
            with pytest.raises(WorldMisconfiguredError, match="upgrade the runtime"):
                await world.migrate()
    finally:
        await conn.execute(f"DROP SCHEMA {pg_schema.quote(schema)} CASCADE")
        await conn.close()


async def test_schemas_isolate_applications(postgres_url: str) -> None:
    first, second = (with_schema(postgres_url, fresh_schema()) for _ in range(2))
    try:
        await _isolated(first, second)
    finally:
        await anyio.to_thread.run_sync(drop_schema, first)
        await anyio.to_thread.run_sync(drop_schema, second)


async def _isolated(first: str, second: str) -> None:
    async with PostgresWorld(first) as a, PostgresWorld(second) as b:
        one = await start(idle, attributes={"order": Unique("same")}, world=a)
        other = await start(idle, attributes={"order": Unique("same")}, world=b)
        assert one.id != other.id
        assert (await a.info()).get("runs.pending") == 1
        assert (await b.info()).get("runs.pending") == 1
        assert await b.get_run(one.id) is None
        claim = await a.find_claim("order", "same")
        assert claim is not None and claim.run_id == one.id
        # notifications stay within their schema too
        await b.wait(WORK_TOPIC, 0.01)  # b's own start is remembered: drain it
        began = anyio.current_time()
        async with anyio.create_task_group() as group:
            group.start_soon(b.wait, WORK_TOPIC, 0.5)
            await anyio.sleep(0.05)
            await start(idle, world=a)
        assert anyio.current_time() - began >= 0.45


async def test_a_notification_wakes_a_waiting_world_at_once(postgres_world_url: str) -> None:
    url = f"{postgres_world_url}&poll=30"
    async with PostgresWorld(url) as waiting, PostgresWorld(url) as other:
        await waiting.migrate()
        await other.migrate()
        await waiting.wait(WORK_TOPIC, 0.01)  # drain anything remembered so far
        elapsed: list[float] = []

        async def waiter() -> None:
            began = anyio.current_time()
            await waiting.wait(WORK_TOPIC, 20.0)
            elapsed.append(anyio.current_time() - began)

        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.sleep(0.2)
            await other.create_run(CreateRunRequest(run_id="r-1", workflow="wf", args=b""))
        # well under the 20 s wait and the 30 s poll: a notification woke it (a loaded
        # machine may take a few seconds to get there, so no tighter bound)
        assert 0.15 < elapsed[0] < 10, f"woke after {elapsed[0]:.2f} s"
        # a signal nobody waited for is remembered by the next wait
        await other.create_run(CreateRunRequest(run_id="r-2", workflow="wf", args=b""))
        await anyio.sleep(0.2)
        began = anyio.current_time()
        await waiting.wait(WORK_TOPIC, 20.0)
        assert anyio.current_time() - began < 10  # at once, not after the 20 s wait


@pytest.mark.slow
async def test_skip_locked_leasing_across_processes_never_double_leases(
    postgres_world_url: str, tmp_path: Path
) -> None:
    ids = await _create_runs(postgres_world_url, 300)
    gate = str(tmp_path)
    results = _in_processes(
        [(_lease_until_empty, postgres_world_url, gate) for _ in range(PROCESSES)]
    )
    leased = [pair for result in results for pair in result]  # type: ignore[attr-defined]
    counts = Counter(item_id for item_id, _ in leased)
    assert sorted(counts) == sorted(f"wf:{run_id}" for run_id in ids)
    assert set(counts.values()) == {1}, "an item was leased twice"
    assert sum(1 for result in results if result) >= 2, "only one process got work"


@pytest.mark.slow
async def test_unique_starts_across_processes_make_exactly_one_run(
    postgres_world_url: str, tmp_path: Path
) -> None:
    shares = [13, 13, 12, 12]
    assert len(shares) == PROCESSES
    results = _in_processes([(_contend, postgres_world_url, str(tmp_path), n) for n in shares])
    outcomes = [outcome for result in results for outcome in result]  # type: ignore[attr-defined]
    created = [o for o in outcomes if o.startswith("run ")]
    assert len(created) == 1, outcomes
    winner = created[0].split()[1]
    assert sorted(outcomes) == sorted([f"run {winner}"] + [f"conflict {winner}"] * 49)


@pytest.mark.slow
async def test_sigkilled_workers_on_postgres(postgres_world_url: str, tmp_path: Path) -> None:
    await crash_and_recover(postgres_world_url, tmp_path, workers=PROCESSES)


def _nested_loop_inners(plan: dict[str, object]) -> list[dict[str, object]]:
    """The inner (second) child of every nested loop in an ``EXPLAIN (FORMAT JSON)`` plan."""
    children = plan.get("Plans", [])
    assert isinstance(children, list)
    inners = [children[1]] if plan.get("Node Type") == "Nested Loop" and len(children) > 1 else []
    return inners + [inner for child in children for inner in _nested_loop_inners(child)]


async def test_a_lease_over_a_fresh_backlog_reads_each_run_by_its_key(
    postgres_world_url: str,
) -> None:
    """A new world's tables have no statistics until autovacuum analyzes them (a minute
    or more). The lease's plan then joined every due item to a scan of all runs: 1.3 s a
    lease over 5,000 due items (``benchmarks/worker_processes.py`` drained 86 workflows a
    second). The takeover of expired leases, an OR of subqueries in the same filter, made
    the planner choose so; it is a ``takeable`` set of its own now."""
    from datetime import timedelta

    from worlds.postgres import codecs
    from worlds.postgres import statements as sql
    from worlds.types import utcnow

    world = PostgresWorld(postgres_world_url)
    async with world:
        await world.migrate()
        for first in range(0, 2000, 100):
            await asyncio.gather(
                *(
                    world.create_run(CreateRunRequest(run_id=f"r-{n}", workflow="wf", args=b""))
                    for n in range(first, first + 100)
                )
            )
    conn = await asyncpg.connect(world.dsn, server_settings={"search_path": world.schema})
    try:
        analyzed = await conn.fetchval(
            "SELECT max(reltuples) FROM pg_class WHERE relname IN ('work', 'runs')"
            " AND relnamespace = $1::regnamespace",
            world.schema,
        )
        assert analyzed < 0  # never analyzed: the planner guesses
        now = utcnow()
        head, middle = codecs.STEP_STARTED_PARTS
        params = [["wf"], now, 64, "w", now + timedelta(seconds=30), head, middle]
        explained = await conn.fetchval("EXPLAIN (FORMAT JSON) " + sql.LEASE, *params)
    finally:
        await conn.close()
    inners = _nested_loop_inners(json.loads(explained)[0]["Plan"])
    scans = [(n.get("Node Type"), n.get("Relation Name")) for n in inners]
    assert ("Seq Scan", "runs") not in scans, scans
