"""Every table of a world's state moves with it (RFC 0024): ``copy_world`` and
``export_runs``/``import_runs`` carry updates (RFC 0021), key limits with their
weights and shares (RFC 0008) and deployments with their pins (RFC 0025), and a
table a future migration adds fails the census below until it is carried or
named as left out, with a reason."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import asyncpg
import pytest

import worlds
from tests.conftest import drop_schema, fresh_schema, patient, with_schema
from workflow import (
    Limited,
    Worker,
    copy_world,
    create_hook,
    export_runs,
    get_key_limit,
    get_run,
    import_runs,
    list_hooks,
    receive_updates,
    resume_hook,
    set_key_limit,
    start,
    workflow,
)
from workflow.deployments import get_deployment
from worlds._dump_sql import CARRIED_TABLES, NOT_CARRIED_TABLES
from worlds.archive import DumpRow, encode_rows
from worlds.protocol import World
from worlds.types import UpdateDelivery, UpdateReceived, UpdateReplied, WorkerInfo

pytestmark = pytest.mark.anyio

BUILD = "v1"
SCHEMAS: dict[str, tuple[str, str]] = {}
"""A PostgreSQL world's URL: its server's URL and its schema."""


@workflow(name="tables-asker")
async def asker(name: str) -> str:
    """Answers two updates, the second after the move."""
    updates = receive_updates("ask")
    first = await anext(updates)
    await first.reply(f"one {first.payload}")
    second = await anext(updates)
    await second.reply(f"two {second.payload}")
    return f"{name} done"


@workflow(name="tables-tenant")
async def tenant_job(tenant: str, n: int) -> str:
    """Holds a ``tenant`` slot until its hook is resumed."""
    return f"{tenant}-{n}:{await create_hook(f'tenant-{tenant}-{n}')}"


FUNCTIONS = [asker, tenant_job]


@pytest.fixture
def open_world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], str]]:
    """The URL of a fresh world of a kind; each call a new one."""
    schemas: list[str] = []

    def make(kind: str) -> str:
        if kind == "memory":
            return "memory://"
        if kind == "sqlite":
            return f"sqlite:///{tmp_path}/{fresh_schema()}.db"
        server = str(request.getfixturevalue("postgres_url"))
        schema = fresh_schema()
        url = patient(with_schema(server, schema))
        schemas.append(url)
        SCHEMAS[url] = (server, schema)
        return url

    yield make
    for url in schemas:
        drop_schema(url)


async def _tables(url: str) -> set[str]:
    """The tables of the world at ``url``, after its migrations."""
    async with worlds.open(url, create=True) as world:
        await world.info()  # opened: every migration applied
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        with sqlite3.connect(path) as db:
            found = db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
        return {row[0] for row in found}
    server, schema = SCHEMAS[url]
    conn = await asyncpg.connect(server)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
        )
    finally:
        await conn.close()
    return {row["table_name"] for row in rows}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_every_table_is_carried_or_left_out_for_a_reason(
    open_world: Callable[[str], str], kind: str
) -> None:
    tables = await _tables(open_world(kind))
    assert not set(CARRIED_TABLES) & set(NOT_CARRIED_TABLES)
    assert all(reason.strip() for reason in NOT_CARRIED_TABLES.values())
    forgotten = tables - set(CARRIED_TABLES) - set(NOT_CARRIED_TABLES)
    assert not forgotten, (
        f"{kind} tables neither carried by a dump nor named as left out: {sorted(forgotten)}; "
        "add each to worlds._dump_sql.CARRIED_TABLES (and the dump) or NOT_CARRIED_TABLES"
    )
    # what a dump names as carried is a table of this schema (no stale names)
    assert set(CARRIED_TABLES) <= tables


class Workload:
    """A run with an answered and a pending update, tenants under a weighted key
    limit (one value served from the key's line, so it has a share), every run
    recorded by build ``v1``."""

    def __init__(self) -> None:
        self.asker = ""
        self.tenants: list[str] = []


async def _start_workload(world: World) -> Workload:
    load = Workload()
    await set_key_limit("tenant", 1, weights={"gold": 3.0}, world=world)
    async with Worker(world, FUNCTIONS, build_id=BUILD, poll_interval=0.02):
        run = await start(asker, "a", world=world)
        load.asker = run.id
        assert await run.update("ask", "x", update_id="u-1", timeout=60) == "one x"
        for tenant, n in (("gold", 1), ("gold", 2), ("blue", 3)):
            started = await start(
                tenant_job, tenant, n, attributes={"tenant": Limited(tenant, 5)}, world=world
            )
            load.tenants.append(started.id)
        await _hooks(world, 1)
        await resume_hook("tenant-gold-1", "p", world=world)  # the key serves the next
        assert await get_run(load.tenants[0], world=world).result(timeout=60) == "gold-1:p"
        await _hooks(world, 1)
    # no worker: the update is accepted and stays pending
    with pytest.raises(TimeoutError):
        await get_run(load.asker, world=world).update("ask", "y", update_id="u-2", timeout=0.3)
    outcome = await world.update_outcome(load.asker, "u-2")
    assert outcome is not None and outcome.state == "pending"
    return load


async def _hooks(world: World, count: int) -> None:
    """Wait until ``count`` tenant hooks are live."""
    for _ in range(600):
        if len([h for h in await list_hooks(world=world) if h.token.startswith("tenant")]) >= (
            count
        ):
            return
        await _nap()
    raise AssertionError("the tenant runs did not wait on their hooks")


async def _nap() -> None:
    await anyio.sleep(0.05)


async def _dump(world: World) -> list[bytes]:
    return sorted(encode_rows([row]) for row in [r async for r in _rows(world)])


async def _rows(world: World) -> AsyncIterator[DumpRow]:
    async for row in world.export_rows():
        yield row


async def _finish(world: World, load: Workload) -> dict[str, str]:
    """Finish every open run on ``world`` with a worker of build ``v1``."""
    async with Worker(world, FUNCTIONS, build_id=BUILD, poll_interval=0.02):
        run = get_run(load.asker, world=world)
        # the answered update is answered again from the log; the pending one now
        assert await run.update("ask", "ignored", update_id="u-1", timeout=60) == "one x"
        assert await run.update("ask", "ignored", update_id="u-2", timeout=60) == "two y"
        results = {"asker": await run.result(timeout=60)}
        for _ in load.tenants[1:]:  # the key limit admits one at a time, in its order
            await _hooks(world, 1)
            token = next(
                h.token for h in await list_hooks(world=world) if h.token.startswith("tenant")
            )
            await resume_hook(token, "q", world=world)
            holder = next(
                r
                for r in load.tenants[1:]
                if r not in results and token.endswith("-2" if r == load.tenants[1] else "-3")
            )
            results[holder] = await get_run(holder, world=world).result(timeout=60)
    events = await get_run(load.asker, world=world).events()
    assert [e.update_id for e in events if isinstance(e, UpdateReceived)] == ["u-1", "u-2"]
    assert len([e for e in events if isinstance(e, UpdateReplied)]) == 2
    return results


async def _counts(url: str) -> dict[str, int]:
    """Rows per carried table of the SQL world at ``url``."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///").split("?")[0]
        with sqlite3.connect(path) as db:
            return {
                t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in CARRIED_TABLES
            }
    server, schema = SCHEMAS[url]
    conn = await asyncpg.connect(server)
    try:
        return {
            t: await conn.fetchval(f'SELECT count(*) FROM "{schema}".{t}') for t in CARRIED_TABLES
        }
    finally:
        await conn.close()


async def test_a_world_moves_to_postgres_and_back_with_updates_key_limits_and_deployments(
    open_world: Callable[[str], str],
) -> None:
    first, middle, last = open_world("sqlite"), open_world("postgres"), open_world("sqlite")
    async with worlds.open(first) as source:
        load = await _start_workload(source)
        before = await _dump(source)
        limit = await get_key_limit("tenant", world=source)
    counts = await _counts(first)
    for table in ("updates", "key_limits", "key_shares", "deployments"):
        assert counts[table] >= 1, f"the workload wrote no {table} row"
    copied = await copy_world(first, middle)
    assert {"update", "key_limit", "key_share", "deployment"} <= set(copied)
    assert await _counts(middle) == counts
    assert await copy_world(middle, last)
    assert await _counts(last) == counts
    async with worlds.open(last) as back:
        # every row as it was, byte for byte, after two moves
        assert await _dump(back) == before
        assert await get_key_limit("tenant", world=back) == limit
        assert limit is not None and list(limit.weights.items()) == [("gold", 3.0)]
        deployed = await get_deployment(BUILD, world=back)
        assert deployed is not None and set(deployed.workflows) == {
            "tables-asker",
            "tables-tenant",
        }
        # the build's record came along: another codebase under v1 is still refused
        with pytest.raises(ValueError):
            await back.register_worker(
                WorkerInfo(id="other", host="h", pid=1, build_id=BUILD, workflows={"x": "run"})
            )
        record = await back.get_run(load.asker)
        assert record is not None and (record.build_id, record.pin) == (BUILD, "run")
        results = await _finish(back, load)
    assert results["asker"] == "a done"
    assert sorted(results[r] for r in load.tenants[1:]) == ["blue-3:q", "gold-2:q"]


@pytest.mark.parametrize(
    ("source_kind", "target_kind"), [("sqlite", "postgres"), ("memory", "sqlite")]
)
async def test_export_then_import_keeps_updates_and_the_runs_build(
    open_world: Callable[[str], str], source_kind: str, target_kind: str
) -> None:
    """A run archive carries the run's accepted update ids and its build and pin; key
    limits and deployments are the world's, moved by ``copy_world``."""
    async with (
        worlds.open(open_world(source_kind)) as source,
        worlds.open(open_world(target_kind), create=True) as target,
    ):
        load = await _start_workload(source)
        out = io.BytesIO()
        assert await export_runs(None, out, world=source) == 3 + 1
        out.seek(0)
        assert await import_runs(out, world=target) == 4
        for run_id in (load.asker, *load.tenants):
            assert await target.get_run(run_id) == await source.get_run(run_id)
            assert await target.read_events(run_id) == await source.read_events(run_id)
        for update_id in ("u-1", "u-2"):
            assert await target.update_outcome(load.asker, update_id) == (
                await source.update_outcome(load.asker, update_id)
            )
        # the update ids are remembered: sending one again appends nothing
        again = UpdateDelivery(name="ask", update_id="u-1", payload=b"\x01")
        assert (await target.send_update(load.asker, again)).state == "replied"
        assert (await target.read_events(load.asker))[-1] == (await source.read_events(load.asker))[
            -1
        ]
        record = await target.get_run(load.asker)
        assert record is not None and (record.build_id, record.pin) == (BUILD, "run")
