"""Archives and moving worlds (issue 30 items 3-4): ``export_runs`` / ``import_runs``
round-trip runs between worlds with identical logs, an exported run replays, and
``copy_world`` moves a live SQLite world to PostgreSQL where its open runs finish."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import anyio
import msgspec
import pytest
from cryptography.fernet import Fernet

import worlds
from examples.fernet_codec import FernetCodec
from tests.api.archive_workload import (
    FUNCTIONS,
    bump,
    finish_workload,
    hooked,
    quick,
    start_workload,
)
from tests.conftest import drop_schema, fresh_schema, full_size, patient, with_schema
from workflow import (
    AttributeConflictError,
    NonDeterminismError,
    Unique,
    Worker,
    copy_world,
    export_runs,
    get_run,
    import_runs,
    prune_runs,
    replay,
    sleep,
    start,
    step,
    workflow,
)
from workflow.schedules import ScheduleExistsError, create_schedule, get_schedule
from workflow.testing import TestEnvironment
from worlds.archive import DumpedRun, decode_archived
from worlds.codec import CodecWorld
from worlds.protocol import World
from worlds.types import WaitCreated, utcnow

pytestmark = pytest.mark.anyio

KINDS = ["memory", "sqlite", "postgres"]
PAIRS = [("memory", "sqlite"), ("sqlite", "postgres"), ("postgres", "memory")]


@pytest.fixture
def open_world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[str], World]]:
    """Open a fresh world of a kind; each call a new one."""
    schemas: list[str] = []

    def make(kind: str) -> World:
        if kind == "memory":
            return worlds.open("memory://")
        if kind == "sqlite":
            return worlds.open(f"sqlite:///{tmp_path}/{len(schemas)}-{fresh_schema()}.db")
        server = str(request.getfixturevalue("postgres_url"))
        url = patient(with_schema(server, fresh_schema()))
        schemas.append(url)
        return worlds.open(url)

    yield make
    for url in schemas:
        drop_schema(url)


async def snapshot(world: World, run_ids: list[str]) -> dict[str, object]:
    """What a run is, read back: record, log and claims, by id."""
    found: dict[str, object] = {}
    for run_id in run_ids:
        run = get_run(run_id, world=world)
        record = await world.get_run(run_id)
        found[run_id] = (record, await run.events(), await run.claims())
    return found


@pytest.mark.parametrize(("source_kind", "target_kind"), PAIRS)
async def test_export_then_import_keeps_runs_and_logs_identical(
    open_world: Callable[[str], World], source_kind: str, target_kind: str
) -> None:
    source, target = open_world(source_kind), open_world(target_kind)
    async with source, target:
        async with Worker(source, FUNCTIONS):
            load = await start_workload(source, closed=6, open_runs=4)
        ids = list(load.runs.values())
        before = await snapshot(source, ids)
        out = io.BytesIO()
        assert await export_runs(None, out, world=source) >= len(ids)
        lines = out.getvalue().splitlines()
        first = json.loads(lines[0])
        assert {"record", "attributes", "claims", "events", "rows"} <= set(first)
        out.seek(0)
        assert await import_runs(out, world=target) == len(lines)
        assert await snapshot(target, ids) == before
        # the imported open runs carry on in the target world
        async with Worker(target, FUNCTIONS):
            results = await finish_workload(target, load)
        assert results[f"o-{1}"] == 2
        assert results["o-7"] == "hooked 7:p-o-7"


async def test_export_by_query_writes_only_matching_runs(
    open_world: Callable[[str], World], tmp_path: Path
) -> None:
    source = open_world("sqlite")
    async with source:
        async with Worker(source, FUNCTIONS):
            load = await start_workload(source, closed=5, open_runs=4)
        path = tmp_path / "completed.jsonl"
        count = await export_runs("status = 'completed'", str(path), world=source)
        assert count == 5
        archived = [decode_archived(line) for line in path.read_bytes().splitlines()]
        assert {a.id for a in archived} == {load.runs[f"o-{n}"] for n in range(1, 6)}
        assert all(a.status == "completed" for a in archived)


async def test_import_refuses_runs_already_present_and_writes_nothing(
    open_world: Callable[[str], World],
) -> None:
    source, target = open_world("memory"), open_world("sqlite")
    async with source, target:
        async with Worker(source, FUNCTIONS):
            await start_workload(source, closed=4, open_runs=0)
        out = io.BytesIO()
        await export_runs(None, out, world=source)
        lines = out.getvalue().splitlines()
        await import_runs(io.BytesIO(lines[0] + b"\n"), world=target)
        held = decode_archived(lines[0]).id
        with pytest.raises(ValueError, match=f"run {held}"):
            await import_runs(io.BytesIO(out.getvalue()), world=target)
        assert len([row async for row in target.export_rows() if isinstance(row, DumpedRun)]) == 1
        with pytest.raises(ValueError, match="line 1"):
            await import_runs(io.BytesIO(b"{not json}\n"), world=target)


async def test_an_exported_run_replays_as_a_history(open_world: Callable[[str], World]) -> None:
    source = open_world("sqlite")
    async with source:
        async with Worker(source, FUNCTIONS):
            run = await start(quick, 41, world=source)
            assert await run.result(timeout=60) == 42
        out = io.StringIO()
        await export_runs(f"id = '{run.id}'", out, world=source)
        (line,) = out.getvalue().splitlines()
    await replay(quick, line)  # the run id comes with the export
    await replay(quick, decode_archived(line), run_id=run.id)
    with pytest.raises(ValueError, match="workflow"):
        await replay(hooked, line)
    # code that changed since the run is caught: the exported log, renamed for it
    events = decode_archived(line).events
    renamed = [msgspec.structs.replace(events[0], workflow="archives-changed"), *events[1:]]
    with pytest.raises(NonDeterminismError):
        await replay(changed_quick, renamed, run_id=run.id)


@step
async def other_bump(n: int) -> int:
    return n + 2


@workflow(name="archives-changed")
async def changed_quick(n: int) -> int:
    return await other_bump(n)


async def test_a_codec_world_exports_payloads_as_stored(
    open_world: Callable[[str], World], tmp_path: Path
) -> None:
    """The bytes travel encrypted; the target opened with the key reads them."""
    key = Fernet.generate_key()
    inner, target_inner = open_world("sqlite"), open_world("postgres")
    source = CodecWorld(inner, FernetCodec(key))
    async with source, target_inner:
        async with Worker(source, FUNCTIONS):
            run = await start(quick, 1, world=source)
            assert await run.result(timeout=60) == 2
        stored = await inner.read_events(run.id)
        out = io.BytesIO()
        await export_runs(None, out, world=source)
        assert b"archives-quick" in out.getvalue()
        out.seek(0)
        await import_runs(out, world=target_inner)
        assert await target_inner.read_events(run.id) == stored
        assert await get_run(run.id, world=CodecWorld(target_inner, FernetCodec(key))).result() == 2


@pytest.mark.slow
async def test_copy_world_moves_a_live_sqlite_world_to_postgres(
    open_world: Callable[[str], World],
) -> None:
    """The issue's test: a SQLite world whose open runs wait on timers, hooks, Limited
    slots and children, copied into PostgreSQL; workers there finish every open run
    with the results the same workload gives without a copy, and claims, tombstones
    and schedules behave as before."""
    closed, open_runs = full_size(60, 700), full_size(24, 300)
    control = open_world("sqlite")
    async with control, Worker(control, FUNCTIONS):
        control_load = await start_workload(control, closed=closed, open_runs=open_runs)
        wanted = await finish_workload(control, control_load)

    source, target = open_world("sqlite"), open_world("postgres")
    async with source, target:
        async with Worker(source, FUNCTIONS):
            load = await start_workload(source, closed=closed, open_runs=open_runs)
            await create_schedule(quick, 0, id="hourly", every=3600.0, paused=True, world=source)
        # the oldest closed runs pruned: their pairs kept as tombstones
        pruned = await prune_runs(
            closed_before=utcnow() + timedelta(seconds=1), limit=5, world=source
        )
        assert len(pruned) == 5
        order_of = {run_id: order for order, run_id in load.runs.items()}
        for run_id in pruned:
            del load.runs[order_of[run_id]]
        kept = next(f"o-{n}" for n in range(1, closed + 1) if f"o-{n}" in load.runs)
        before = await snapshot(source, [load.runs[kept], *list(load.runs.values())[-4:]])
        seen: list[tuple[int, int | None]] = []
        counts = await copy_world(source, target, progress=lambda d, t: seen.append((d, t)))
        assert counts["run"] > len(load.runs)  # with the children
        assert seen and seen[-1][0] == seen[-1][1]
        assert await snapshot(target, list(before)) == before
        # a unique start of a copied pair is refused naming the copied run
        with pytest.raises(AttributeConflictError) as refused:
            await start(quick, 0, attributes={"order": Unique(kept)}, world=target)
        assert refused.value.existing_run_id == load.runs[kept]
        # the schedule is there as it was, and its id still taken
        copied = await get_schedule("hourly", world=target).describe()
        assert copied == await get_schedule("hourly", world=source).describe()
        with pytest.raises(ScheduleExistsError):
            await create_schedule(quick, 0, id="hourly", every=60.0, world=target)
        tombstone = order_of[pruned[0]]
        with pytest.raises(AttributeConflictError) as refused:
            await start(quick, 0, attributes={"order": Unique(tombstone)}, world=target)
        assert refused.value.existing_run_id == pruned[0]
        async with Worker(target, FUNCTIONS):
            results = await finish_workload(target, load)
        # the source was left as it was: its open runs are still open there
        still = await get_run(load.runs[f"o-{closed + 1}"], world=source).status()  # hooked
        assert not still.is_closed
    assert results == {order: wanted[order] for order in results}
    assert len(results) == len(wanted) - len(pruned)


@workflow(name="archives-monthly")
async def monthly(n: int) -> int:
    await sleep(timedelta(days=30))
    return n


async def test_the_testing_kit_replays_and_continues_exported_runs(
    open_world: Callable[[str], World],
) -> None:
    """An exported run is a history for ``env.replay``, and an exported open run
    carries on in the environment, on its skipping clock."""
    source = open_world("sqlite")
    async with source:
        async with Worker(source, [quick, monthly, *FUNCTIONS]):
            done = await start(quick, 1, world=source)
            assert await done.result(timeout=60) == 2
            waiting = await start(monthly, 5, world=source)
            with anyio.fail_after(60):
                while not any(isinstance(e, WaitCreated) for e in await waiting.events()):
                    await anyio.sleep(0.05)
        out = io.BytesIO()
        assert await export_runs(None, out, world=source) == 2
    lines = {decode_archived(line).id: line for line in out.getvalue().splitlines()}
    async with TestEnvironment(workflows=[monthly, quick, bump]) as env:
        await env.replay(quick, lines[done.id])
        out.seek(0)
        loaded = await env.import_runs(out)
        assert {run.id for run in loaded} == {done.id, waiting.id}
        with anyio.fail_after(60):
            assert await get_run(waiting.id, world=env.world).result() == 5
