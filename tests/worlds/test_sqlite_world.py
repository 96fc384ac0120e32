"""What the SQLite world adds to the protocol: a file that outlives processes.

The generic protocol is checked by ``worlds.testing``; these tests cover what
only a file-backed world can get wrong: durability across reopen and crash,
several connections and processes on one file, lazy connection, locking, the
URL, schema migration, and the query plans behind ``list_runs`` and ``prune_runs``.
Rules that hold for every world (start policies, run claims, pruning) are in the
conformance kit, which this world runs in ``test_conformance_sqlite.py``.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import worlds
from benchmarks.ours import add_one, one_step
from benchmarks.sqlite_statements import SqliteStatements
from workflow import Worker, start, step, workflow
from worlds.errors import WorldFileReplacedError, WorldMisconfiguredError
from worlds.protocol import World, run_topic
from worlds.query import RunQuery
from worlds.semantics import new_run_id
from worlds.sqlite import SqliteWorld, WorldClosedError, codecs, filters, schema, statements
from worlds.sqlite.migrations import MIGRATIONS
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    Claim,
    CommitRequest,
    CreateRunRequest,
    ErrorInfo,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    NewWorkItem,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunRecord,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
    WorkItem,
)

REPO = Path(__file__).resolve().parents[2]
WF = "wf"
STEP = "step"
WHEN = datetime(2024, 5, 17, 12, 30, 15, 123456, tzinfo=UTC)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/world.db"


async def create(
    world: World,
    attributes: dict[str, AttributeValue] | None = None,
    unique: Sequence[str] = (),
    workflow: str = WF,
) -> RunRecord:
    result = await world.create_run(
        CreateRunRequest(
            run_id=new_run_id(),
            workflow=workflow,
            args=b"\x90",
            attributes=attributes or {},
            unique=frozenset(unique),
        )
    )
    assert result.run is not None, result.conflict
    return result.run


async def lease_workflow(world: World, run_id: str) -> WorkItem:
    items = await world.lease("setup", names={WF}, limit=1000, lease_seconds=300)
    (item,) = [item for item in items if item.run_id == run_id]
    return item


# --------------------------------------------------------------------------- durability


@pytest.mark.anyio
async def test_everything_survives_closing_and_reopening(url: str) -> None:
    async with SqliteWorld(url) as world:
        run = await create(world, {"customer": "c-9", "at": WHEN, "n": 1.5}, unique=["customer"])
        item = await lease_workflow(world, run.id)
        done = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="setup",
                lease=item,
                events=(
                    RunStarted(),
                    AttributeSet(key="stage", value="paying"),
                    StepCreated(step=1, name=STEP, args=b"a"),
                ),
                schedule=(NewWorkItem(kind="step", name=STEP, number=1, payload=b"p", lease=True),),
            )
        )
        (step,) = done.leased
        record = await world.get_run(run.id)
        log = await world.read_events(run.id)
        claim = await world.find_claim("customer", "c-9")

    async with SqliteWorld(url) as again:
        assert await again.get_run(run.id) == record
        assert await again.read_events(run.id) == log
        assert await again.find_claim("customer", "c-9") == claim
        page = await again.list_runs(RunQuery(attributes={"stage": "paying", "at": WHEN}))
        assert [r.id for r in page.runs] == [run.id]
        # the lease and its token are durable: nobody else gets the step, its holder
        # can still finish it
        assert await again.lease("w2", names={STEP}, limit=10, lease_seconds=30) == []
        finished = await again.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="setup",
                lease=step,
                events=(StepCompleted(step=1, attempt=1, result=b"r"),),
            )
        )
        assert finished.ok and [e.seq for e in finished.events] == [len(log) + 1]


@pytest.mark.anyio
@pytest.mark.slow
async def test_committed_work_survives_a_killed_process(tmp_path: Path, url: str) -> None:
    script = """
import asyncio, os, sys
from worlds.sqlite import SqliteWorld
from worlds.types import CommitRequest, CreateRunRequest, RunStarted

async def main():
    world = SqliteWorld(sys.argv[1])
    await world.create_run(CreateRunRequest(run_id="run-1", workflow="wf", args=b""))
    await world.commit(CommitRequest(run_id="run-1", worker_id="w", events=(RunStarted(),)))
    os._exit(0)  # no close, no checkpoint: the commits live only in the WAL

asyncio.run(main())
"""
    await _run_children([[sys.executable, "-c", script, url]])
    assert (tmp_path / "world.db-wal").exists()
    async with SqliteWorld(url) as world:
        run = await world.get_run("run-1")
        assert run is not None and run.status == RunStatus.RUNNING and run.last_seq == 2


@pytest.mark.anyio
async def test_every_event_type_round_trips_through_the_file(url: str) -> None:
    error = ErrorInfo(type="KeyError", message="'x'", traceback="Traceback ...")
    events: list[EventKind] = [
        RunStarted(),
        StepCreated(step=1, name=STEP, args=b"\x91\x01"),
        StepStarted(step=1, attempt=1),
        StepRetrying(step=1, attempt=1, error=error, retry_at=WHEN),
        StepCompleted(step=1, attempt=2, result=b"\x02"),
        StepFailed(step=2, attempt=3, error=error),
        StepDiscarded(step=3, attempt=1, outcome="completed"),
        AttributeSet(key="when", value=WHEN),
        AttributeSet(key="unique-when", value=WHEN, unique=True),
        AttributeSet(key="ratio", value=0.25, step=1, attempt=2),
        AttributeSet(key="flag", value=True),
        AttributeSet(key="nothing", value=None),
        AttributeConflict(key="order", value=7, holder_run_id="other", step=1, attempt=1),
        WaitCreated(wait=1, until=WHEN),
        WaitCompleted(wait=1),
        HookCreated(hook=1, token="t-1", attributes={"at": WHEN, "n": 2}),
        HookReceived(hook=1, payload=b"payload"),
        HookConflict(hook=2, token="t-1", holder_run_id="other"),
        RunFailed(error=error),
    ]
    start_attributes: dict[str, AttributeValue] = {"at": WHEN, "n": 1, "x": 1.0, "s": "1"}
    async with SqliteWorld(url) as world:
        run = await create(world, start_attributes)
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id="w", events=tuple(events))
        )
    async with SqliteWorld(url) as again:
        stored = await again.read_events(run.id)
        created = stored[0]
        assert isinstance(created, RunCreated) and created.attributes == start_attributes
        assert [type(v) for v in created.attributes.values()] == [datetime, int, float, str]
        assert stored[1:] == list(result.events)
        assert [type(e) for e in stored[1:]] == [type(e) for e in events]
        claimed = next(e for e in stored if isinstance(e, AttributeSet) and e.unique)
        assert isinstance(claimed, AttributeSet) and claimed.generation == 1
        record = await again.get_run(run.id)
        assert record is not None
        assert record.attributes == {
            **start_attributes,
            "when": WHEN,
            "unique-when": WHEN,
            "flag": True,
            "nothing": None,
        }
        assert record.error == error and record.status == RunStatus.FAILED


# --------------------------------------------------------------------------- opening


@pytest.mark.anyio
async def test_open_is_lazy_and_creates_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "world.db"
    world = worlds.open(f"sqlite:///{path}")
    assert isinstance(world, SqliteWorld)
    assert not path.parent.exists()
    async with world:
        assert not path.parent.exists()
        assert await world.get_run("missing") is None
        assert path.exists()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    finally:
        db.close()


@pytest.mark.anyio
async def test_a_relative_path_is_fixed_when_the_world_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    world = worlds.open("sqlite:///.workflow/world.db")
    monkeypatch.chdir(tmp_path.parent)
    async with world:
        await create(world)
    assert (tmp_path / ".workflow" / "world.db").exists()


def test_urls_are_checked_when_the_world_is_created(tmp_path: Path) -> None:
    world = SqliteWorld(f"sqlite:///{tmp_path}/w.db?poll=0.2&busy_timeout=1&inline=0")
    assert world.path == f"{tmp_path}/w.db" and world.poll_interval == 0.2
    for bad in (
        "sqlite://",
        "sqlite:///",
        f"sqlite:///{tmp_path}/w.db?pool=1",
        f"sqlite:///{tmp_path}/w.db?poll=soon",
        f"sqlite:///{tmp_path}/w.db?poll=-1",
        "postgresql:///x",
    ):
        with pytest.raises(ValueError):
            SqliteWorld(bad)
    assert not list(tmp_path.iterdir()), "creating a world touched the disk"


@pytest.mark.anyio
async def test_commits_are_durable_by_default_and_normal_is_opt_in(tmp_path: Path) -> None:
    """``synchronous=FULL`` unless the URL trades it away; the level is the one the
    connection really runs at, read back from SQLite."""
    for query, level in (
        ("", "full"),
        ("?synchronous=normal", "normal"),
        ("?synchronous=FULL", "full"),
    ):
        async with worlds.open(f"sqlite:///{tmp_path}/{level}{len(query)}.db{query}") as world:
            await create(world)
            assert (await world.info())["synchronous"] == level


def test_an_unknown_synchronous_level_is_refused_at_open(tmp_path: Path) -> None:
    for bad in ("off", "extra", "", "2", "fast"):
        with pytest.raises(ValueError, match=r"'full'.*'normal'"):
            worlds.open(f"sqlite:///{tmp_path}/w.db?synchronous={bad}")
    assert not list(tmp_path.iterdir()), "a refused URL touched the disk"


@pytest.mark.anyio
async def test_writes_of_one_loop_turn_share_a_transaction_and_fail_alone(url: str) -> None:
    """Group commit: concurrent creates go to SQLite as one transaction; a duplicate
    run id among them fails its own caller only, and everyone else's run exists."""
    ids = [new_run_id() for _ in range(20)]
    async with worlds.open(url) as world:
        assert isinstance(world, SqliteWorld)

        def request(run_id: str) -> CreateRunRequest:
            return CreateRunRequest(run_id=run_id, workflow=WF, args=b"\x90")

        await world.create_run(request(ids[0]))
        outcomes: dict[str, BaseException | None] = {}

        async def one(index: int, run_id: str) -> None:
            try:
                await world.create_run(request(run_id))
                outcomes[f"{index}"] = None
            except ValueError as exc:
                outcomes[f"{index}"] = exc

        async with anyio.create_task_group() as group:
            for index, run_id in enumerate([ids[0], *ids[1:], ids[5]]):
                group.start_soon(one, index, run_id)
        failed = sorted(int(key) for key, exc in outcomes.items() if exc is not None)
        assert failed == [0, 20], outcomes
        for run_id in ids:
            assert await world.get_run(run_id) is not None
        assert world._connection.batches >= 1, "no transaction carried two writes"


@pytest.mark.anyio
async def test_a_database_from_a_newer_version_is_refused(tmp_path: Path, url: str) -> None:
    db = sqlite3.connect(tmp_path / "world.db")
    db.execute(f"PRAGMA user_version = {schema.SCHEMA_VERSION + 1}")
    db.close()
    async with SqliteWorld(url) as world:
        with pytest.raises(WorldMisconfiguredError, match="schema version"):
            await world.get_run("x")


@pytest.mark.anyio
async def test_a_closed_world_refuses_every_call(url: str, tmp_path: Path) -> None:
    never_used = SqliteWorld(f"sqlite:///{tmp_path}/unused.db")
    await never_used.close()
    assert not (tmp_path / "unused.db").exists()

    world = SqliteWorld(url)
    async with world:
        run = await create(world)
    await world.close()  # twice is fine
    calls = [
        world.get_run(run.id),
        world.read_events(run.id),
        world.list_runs(RunQuery()),
        world.find_claim("k", "v"),
        world.run_claims(run.id),
        world.prune_runs(WHEN),
        world.cancel_run(run.id, None),
        world.commit(CommitRequest(run_id=run.id, worker_id="w")),
        world.lease("w", names={WF}, limit=1, lease_seconds=1),
        world.release("w", []),
        world.renew_leases("w", [], 1),
        world.wait("work", 1),
        world.create_run(CreateRunRequest(run_id="x", workflow=WF, args=b"")),
    ]
    for call in calls:
        with pytest.raises(WorldClosedError, match="closed"):
            await call


@pytest.mark.anyio
async def test_close_wakes_waiters(url: str) -> None:
    world = SqliteWorld(f"{url}?poll=30")
    await create(world)
    started = time.monotonic()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(world.wait, "some-topic", 30.0)
        await anyio.sleep(0.05)
        await world.close()
    assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- sharing a file


@pytest.mark.anyio
async def test_two_world_objects_share_claims_runs_and_wake_ups(url: str) -> None:
    slow_poll = f"{url}?poll=30"  # so only a shared in-process wake-up can be quick
    async with SqliteWorld(slow_poll) as first, SqliteWorld(slow_poll) as second:
        holder = await create(first, {"order": "o-1"}, unique=["order"])
        refused = await second.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"order": "o-1"},
                unique=frozenset({"order"}),
            )
        )
        assert refused.conflict is not None and refused.conflict.holder_run_id == holder.id

        async def cancel_soon() -> None:
            await anyio.sleep(0.2)
            await first.cancel_run(holder.id, "done")

        started = time.monotonic()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_soon)
            with anyio.fail_after(30):
                while (record := await second.get_run(holder.id)) and not record.status.is_closed:
                    await second.wait(run_topic(holder.id), 10.0)
        # under the 10 s wait and the 30 s poll: the wake-up is shared (no tighter bound,
        # which a loaded machine overran)
        assert time.monotonic() - started < 9, "the cancel did not wake the other world"


@pytest.mark.anyio
async def test_wait_returns_within_the_poll_interval(url: str) -> None:
    async with SqliteWorld(f"{url}?poll=0.02") as world:
        started = time.monotonic()
        await world.wait("nobody-signals-this", 10.0)
        assert time.monotonic() - started < 5  # a poll's time, not the 10 s wait


@pytest.mark.anyio
@pytest.mark.parametrize("busy_timeout", ["10", "0.05"])
async def test_a_write_waits_for_another_connection_without_blocking_the_loop(
    tmp_path: Path, url: str, busy_timeout: str
) -> None:
    async with SqliteWorld(f"{url}?busy_timeout={busy_timeout}") as world:
        await create(world)
        blocker = sqlite3.connect(tmp_path / "world.db", isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async def unblock_later() -> None:
            await anyio.sleep(0.4)
            blocker.execute("COMMIT")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(tick)
            tasks.start_soon(unblock_later)
            started = time.monotonic()
            run = await create(world)  # neither raises "database is locked" nor blocks
            waited = time.monotonic() - started
            tasks.cancel_scope.cancel()
        blocker.close()
        assert waited >= 0.3
        assert ticks >= 10, f"the event loop ticked {ticks} times in {waited:.2f} s"
        assert await world.get_run(run.id) is not None


@pytest.mark.anyio
async def test_the_threaded_mode_behaves_the_same(url: str) -> None:
    async with SqliteWorld(f"{url}?inline=0") as world:
        run = await create(world, {"k": "v"}, unique=["k"])
        item = await lease_workflow(world, run.id)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="setup",
                lease=item,
                events=(RunStarted(), StepCreated(step=1, name=STEP, args=b"")),
                schedule=(NewWorkItem(kind="step", name=STEP, number=1, lease=True),),
            )
        )
        assert result.ok and [i.number for i in result.leased] == [1]
        assert [type(e) for e in await world.read_events(run.id)][-1] is StepStarted
        claim = await world.find_claim("k", "v")
        assert claim is not None and claim.run_id == run.id


# --------------------------------------------------------------------------- processes

_CHILD = """
import asyncio, json, os, sys, time
from worlds.semantics import new_run_id
from worlds.sqlite import SqliteWorld
from worlds.types import CommitRequest, CreateRunRequest, StepCompleted

async def main(url, go, mode, name, rounds):
    out = []
    async with SqliteWorld(url) as world:
        await world.get_run("warm-up")
        while not os.path.exists(go):
            await asyncio.sleep(0.002)
        if mode == "claim":
            for i in range(int(rounds)):
                run_id = new_run_id()
                result = await world.create_run(CreateRunRequest(
                    run_id=run_id, workflow="wf", args=b"",
                    attributes={"order": f"o-{i}"}, unique=frozenset({"order"})))
                holder = result.conflict.holder_run_id if result.conflict else None
                out.append([f"o-{i}", run_id, result.run is not None, holder])
        else:
            idle = 0
            while idle < 5:
                items = await world.lease(name, names={"step"}, limit=3, lease_seconds=300)
                if not items:
                    idle += 1
                    await asyncio.sleep(0.01)
                    continue
                idle = 0
                for item in items:
                    await asyncio.sleep(0.005)  # the step's work, so the processes interleave
                    completed = StepCompleted(step=item.number, attempt=item.attempt, result=b"")
                    done = await world.commit(CommitRequest(
                        run_id=item.run_id, worker_id=name, lease=item, events=(completed,)))
                    out.append([item.id, item.token, item.attempt, done.ok])
    print(json.dumps(out))

asyncio.run(main(*sys.argv[1:]))
"""


async def _run_children(
    commands: list[list[str]], go: Path | None = None
) -> list[list[list[object]]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    children = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    if go is not None:
        await anyio.sleep(0.5)
        go.touch()
    outputs = []
    for child in children:
        stdout, stderr = await anyio.to_thread.run_sync(
            functools.partial(child.communicate, timeout=120)
        )
        assert child.returncode == 0, stderr
        lines = stdout.strip().splitlines()
        outputs.append(json.loads(lines[-1]) if lines else [])
    return outputs


def _children(url: str, go: Path, mode: str, count: int, rounds: int = 0) -> list[list[str]]:
    return [
        [sys.executable, "-c", _CHILD, url, str(go), mode, f"proc-{n}", str(rounds)]
        for n in range(count)
    ]


@pytest.mark.anyio
@pytest.mark.slow
async def test_processes_racing_for_a_unique_pair_get_one_winner(tmp_path: Path, url: str) -> None:
    go = tmp_path / "go"
    rounds = 25
    outputs = await _run_children(_children(url, go, "claim", 4, rounds), go)
    attempts = [row for output in outputs for row in output]
    assert len(attempts) == 4 * rounds
    async with SqliteWorld(url) as world:
        for i in range(rounds):
            value = f"o-{i}"
            tries = [row for row in attempts if row[0] == value]
            winners = [run_id for _, run_id, won, _ in tries if won]
            assert len(winners) == 1, f"{value}: {len(winners)} winners"
            assert all(holder == winners[0] for _, _, won, holder in tries if not won)
            claim = await world.find_claim("order", value)
            assert claim is not None and claim.run_id == winners[0]
            page = await world.list_runs(RunQuery(attributes={"order": value}))
            assert [run.id for run in page.runs] == winners
        assert len((await world.list_runs(RunQuery(limit=1000))).runs) == rounds


@pytest.mark.anyio
@pytest.mark.slow
async def test_processes_leasing_one_queue_never_share_an_item(tmp_path: Path, url: str) -> None:
    runs, steps = 20, 10
    async with SqliteWorld(url) as world:
        ids = [(await create(world)).id for _ in range(runs)]
        items = await world.lease("setup", names={WF}, limit=runs, lease_seconds=300)
        assert len(items) == runs
        for item in items:
            result = await world.commit(
                CommitRequest(
                    run_id=item.run_id,
                    worker_id="setup",
                    lease=item,
                    events=(
                        RunStarted(),
                        *(StepCreated(step=n, name=STEP, args=b"") for n in range(1, steps + 1)),
                    ),
                    schedule=tuple(
                        NewWorkItem(kind="step", name=STEP, number=n) for n in range(1, steps + 1)
                    ),
                )
            )
            assert result.ok

    go = tmp_path / "go"
    outputs = await _run_children(_children(url, go, "lease", 4), go)
    leased = [row for output in outputs for row in output]
    counts = Counter(item_id for item_id, *_ in leased)
    assert len(counts) == runs * steps and set(counts.values()) == {1}, "an item leased twice"
    assert len({token for _, token, _, _ in leased}) == len(leased)
    assert all(attempt == 1 and ok for _, _, attempt, ok in leased)
    assert sum(bool(output) for output in outputs) >= 2, "one process did all the work"

    async with SqliteWorld(url) as world:
        for run_id in ids:
            log = await world.read_events(run_id)
            assert [e.seq for e in log] == list(range(1, len(log) + 1))
            started = sorted(e.step for e in log if isinstance(e, StepStarted))
            completed = sorted(e.step for e in log if isinstance(e, StepCompleted))
            assert started == completed == list(range(1, steps + 1))
        assert await world.lease("late", names={STEP}, limit=10, lease_seconds=1) == []


# --------------------------------------------------------------------------- migration


async def close(world: World, run_id: str, event: EventKind | None = None) -> RunRecord:
    """Close run ``run_id`` (completed unless ``event`` says otherwise)."""
    closing = event or RunCompleted(result=b"")
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="w", events=(closing,)))
    assert result.ok and result.status.is_closed
    record = await world.get_run(run_id)
    assert record is not None and record.closed_at is not None
    return record


@pytest.mark.anyio
async def test_a_version_1_file_is_migrated_in_place(tmp_path: Path, url: str) -> None:
    async with SqliteWorld(url) as world:
        holder = await create(world, {"order": "o-1"}, unique=["order"])
    # Turn the file back into schema version 1: claims.run_id was NOT NULL, and
    # neither claims_run, runs_closed, the hook tables, schedules, streams, settings,
    # rate_tokens, workers, the key-limit tables, deployments nor slot_samples existed
    # (nor runs.build_id, runs.pin and runs.admitted_at).
    db = sqlite3.connect(tmp_path / "world.db", isolation_level=None)
    try:
        v1_claims = (
            MIGRATIONS[2][0]
            .replace("claims_v2", "claims_v1")
            .replace("run_id TEXT,", "run_id TEXT NOT NULL,")
        )
        for statement in (
            "DROP TABLE schedules",
            "DROP TABLE hooks",
            "DROP TABLE hook_resumes",
            "DROP TABLE slots",
            "DROP TABLE streams",
            "DROP TABLE settings",
            "DROP TABLE rate_tokens",
            "DROP TABLE workers",
            "DROP TABLE deployments",
            "DROP INDEX runs_build",
            "ALTER TABLE runs DROP COLUMN build_id",
            "ALTER TABLE runs DROP COLUMN pin",
            "ALTER TABLE runs DROP COLUMN admitted_at",
            "DROP TABLE key_limits",
            "DROP TABLE key_shares",
            "DROP TABLE updates",
            "DROP TABLE slot_samples",
            "DROP INDEX runs_created",
            "DROP INDEX runs_closed_status",
            "DROP INDEX claims_run",
            "DROP INDEX claims_lapsing",
            "DROP INDEX runs_closed",
            v1_claims,
            "INSERT INTO claims_v1 SELECT key, ivalue, value, run_id, generation, step, attempt "
            "FROM claims",
            "DROP TABLE claims",
            "ALTER TABLE claims_v1 RENAME TO claims",
            "PRAGMA user_version = 1",
        ):
            db.execute(statement)
    finally:
        db.close()

    async with SqliteWorld(url) as world:
        assert await world.run_claims(holder.id) == [
            Claim(key="order", value="o-1", run_id=holder.id, generation=1)
        ]
        await close(world, holder.id)
        cutoff = datetime.now(UTC) + timedelta(seconds=1)
        assert await world.prune_runs(cutoff, release_claims=True) == [holder.id]
        await create(world, {"order": "o-1"}, unique=["order"])
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.generation == 2
    db = sqlite3.connect(tmp_path / "world.db")
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        assert {"claims_run", "runs_closed", "hooks", "hook_resumes"} <= indexes
        assert {"schedules", "schedules_wake"} <= indexes
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


# --------------------------------------------------------------------------- query plans


def _plan(path: Path, query: RunQuery, before: str | None) -> list[str]:
    statement, params = filters.list_runs_sql(query, before)
    db = sqlite3.connect(path)
    try:
        return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
    finally:
        db.close()


@pytest.mark.anyio
async def test_attribute_filters_drive_the_scan_from_the_attribute_index(
    tmp_path: Path, url: str
) -> None:
    async with SqliteWorld(url) as world:
        for n in range(40):
            await create(world, {"customer": f"c-{n % 4}", "region": "eu" if n % 2 else "us"})
        runs = [run.id for run in (await world.list_runs(RunQuery(limit=100))).runs]
    path = tmp_path / "world.db"
    queries = [
        RunQuery(attributes={"customer": "c-1"}),
        RunQuery(
            attributes={"customer": "c-1", "region": "eu"},
            workflow=WF,
            statuses=frozenset({RunStatus.PENDING, RunStatus.RUNNING}),
            created_after=WHEN,
        ),
    ]
    for query in queries:
        for before in (None, runs[5]):
            plan = _plan(path, query, before)
            bound = " AND run_id<?" if before else ""
            assert (
                plan[0]
                == f"SEARCH a USING COVERING INDEX attributes_value (key=? AND ivalue=?{bound})"
            )
            assert not any("SCAN" in line or "TEMP B-TREE" in line for line in plan), plan


@pytest.mark.anyio
async def test_workflow_and_status_filters_use_their_indexes(tmp_path: Path, url: str) -> None:
    async with SqliteWorld(url) as world:
        await create(world)
    path = tmp_path / "world.db"
    assert _plan(path, RunQuery(workflow=WF), "x") == [
        "SEARCH r USING INDEX runs_workflow (workflow=? AND id<?)"
    ]
    assert _plan(path, RunQuery(statuses=frozenset({RunStatus.RUNNING})), "x") == [
        "SEARCH r USING INDEX runs_status (status=? AND id<?)"
    ]
    several = _plan(
        path, RunQuery(statuses=frozenset({RunStatus.FAILED, RunStatus.CANCELLED})), "x"
    )
    assert several[0] == "MERGE (UNION ALL)" and not any("TEMP B-TREE" in line for line in several)
    assert _plan(path, RunQuery(), "x") == ["SEARCH r USING INDEX sqlite_autoindex_runs_1 (id<?)"]
    assert _plan(path, RunQuery(created_after=WHEN - timedelta(days=1)), None) == [
        "SCAN r USING INDEX sqlite_autoindex_runs_1"
    ]


def _explain(path: Path, statement: str, params: Sequence[object]) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
    finally:
        db.close()


@pytest.mark.anyio
async def test_prune_and_run_claims_use_their_indexes(tmp_path: Path, url: str) -> None:
    async with SqliteWorld(url) as world:
        for n in range(20):
            run = await create(world, {"order": f"o-{n}"}, unique=["order"])
            if n % 2:
                await close(world, run.id)
    path = tmp_path / "world.db"
    # the pin check is one primary-key probe per candidate; the status (retention's
    # per-status prune) is read from the run's row
    for status in (None, "completed"):
        assert _explain(path, statements.PRUNABLE_RUNS, (codecs.to_micros(WHEN), 10, status)) == [
            "SEARCH runs USING INDEX runs_closed (closed_at>? AND closed_at<?)",
            "CORRELATED SCALAR SUBQUERY 1",
            "SEARCH attributes USING PRIMARY KEY (run_id=? AND key=?)",
        ]
    assert _explain(path, statements.RUN_CLAIMS, ("r", 0)) == [
        "SEARCH claims USING INDEX claims_run (run_id=?)"
    ]
    for statement in statements.PRUNE_RUN:
        (line,) = _explain(path, statement, ("r",))
        assert line.startswith("SEARCH ") and line.endswith(("(run_id=?)", "(id=?)")), line


@pytest.mark.anyio
async def test_closing_a_run_finds_its_children_through_the_attribute_index(
    tmp_path: Path, url: str
) -> None:
    """Every closed run looks for its open children under the write lock: with a plan
    that walked the open runs by status, a bulk cancel of n open runs read n runs per
    cancel (2.5 ms each at 5,000 open runs, RFC 0023)."""
    async with SqliteWorld(url) as world:
        for _ in range(20):
            await create(world)
    plan = _explain(tmp_path / "world.db", statements.OPEN_CHILDREN, ("$parent", "s:r"))
    assert plan[:2] == [
        "SEARCH a USING COVERING INDEX attributes_value (key=? AND ivalue=?)",
        "SEARCH r USING INDEX sqlite_autoindex_runs_1 (id=?)",
    ], plan


# ------------------------------------------------------------- the file under the world


@workflow
async def echo_flow(x: int) -> int:
    return x


async def _replace_with_another_world(path: Path) -> str:
    """Put a fresh world file holding one run at ``path``; that run's id."""
    other = path.with_name("other.db")
    async with worlds.open(f"sqlite:///{other}") as world:
        run = await start(echo_flow, 7, world=world)
    os.replace(other, path)  # closed: its WAL was checkpointed and removed
    for stale in ("-wal", "-shm"):  # the old file's: they would be read as the new one's
        Path(f"{path}{stale}").unlink(missing_ok=True)
    return run.id


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_file_deleted_or_replaced_under_an_open_world_is_refused(
    tmp_path: Path, how: str
) -> None:
    """Nothing is acknowledged into a file nobody can open again: after the world's
    file is deleted or replaced, every call raises ``WorldFileReplacedError`` naming
    the path, and the file now at the path gets nothing from this world."""
    path = tmp_path / "world.db"
    async with worlds.open(f"sqlite:///{path}") as world:
        first = await start(echo_flow, 1, world=world)
        if how == "deleted":
            path.unlink()
        else:
            kept = await _replace_with_another_world(path)
        with pytest.raises(WorldFileReplacedError, match=f"{path} was {how}"):
            await start(echo_flow, 2, world=world)
        with pytest.raises(WorldFileReplacedError):
            await world.get_run(first.id)
    if how == "replaced":
        async with worlds.open(f"sqlite:///{path}") as world:
            assert [r.id for r in (await world.list_runs(RunQuery())).runs] == [kept]


@step
async def waits_for(gate: str) -> str:
    Path(gate + ".started").touch()
    while not Path(gate).exists():
        await anyio.sleep(0.02)
    return "done"


@workflow
async def gated_once(gate: str) -> str:
    return await waits_for(gate)


@pytest.mark.anyio
async def test_a_worker_whose_file_is_replaced_stops_before_committing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A step finishes after the file was replaced: its result is not committed to
    the old file; the worker stops with one line naming the file."""
    path, gate = tmp_path / "world.db", tmp_path / "gate"
    async with worlds.open(f"sqlite:///{path}") as world:
        worker = Worker(world, [gated_once], lease_seconds=8, poll_interval=0.05)
        with anyio.fail_after(30):
            async with worker:
                await start(gated_once, str(gate), world=world)
                while not Path(f"{gate}.started").exists():
                    await anyio.sleep(0.02)
                await _replace_with_another_world(path)
                gate.touch()
                while worker.failure is None:
                    await anyio.sleep(0.02)
    assert isinstance(worker.failure, WorldFileReplacedError)
    stops = [r for r in caplog.records if "stops" in r.getMessage()]
    assert len(stops) == 1 and str(path) in stops[0].getMessage()


@step
async def echo(i: int) -> int:
    return i


@workflow
async def fan_out(count: int) -> int:
    import asyncio

    return sum(await asyncio.gather(*(echo(i) for i in range(count))))


@pytest.mark.anyio
async def test_a_commit_with_more_events_than_one_insert_takes_stores_them_all(
    url: str,
) -> None:
    """A transaction's events go in as multi-row INSERTs of at most
    ``EVENTS_PER_INSERT`` rows: a workflow task creating more steps than that
    stores every event, numbered without a gap, and the run completes."""
    count = statements.EVENTS_PER_INSERT + 37
    async with worlds.open(f"{url}?synchronous=normal") as world, Worker(world, [fan_out]):
        run = await start(fan_out, count, world=world)
        assert await run.result() == sum(range(count))
        events = await world.read_events(run.id)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    created = [event for event in events if isinstance(event, StepCreated)]
    assert sorted(event.step for event in created) == list(range(1, count + 1))


@pytest.mark.anyio
async def test_a_one_step_workflow_costs_eight_statements_and_two_transactions(
    url: str,
) -> None:
    """The hot path's statement count (``rfcs/0018``): the benchmarks' one-step workflow started
    beside its worker is two transactions (the start with its first task; the step
    with the close) and eight statements besides ``BEGIN``/``COMMIT``. The commit's
    first read also answers its stale check (the events it has not seen) and what
    closing the run frees, so neither is read again."""
    runs = 20
    with SqliteStatements(by_text=True) as traced:
        world = worlds.open(f"{url}?synchronous=normal&poll=30")
        async with world, Worker(world, [one_step, add_one]):
            for x in range(3):  # warm-up: the worker's first polls, the caches
                assert await (await start(one_step, x, world=world)).result() == x + 1
            traced.texts.clear()
            for x in range(runs):
                assert await (await start(one_step, x, world=world)).result() == x + 1
    texts = {text: count for text, count in traced.texts.items() if not text.startswith("PRAGMA")}
    # the slack: a worker's heartbeat (two statements on ``workers``) or poll may fall
    # in the window, not a statement per workflow
    assert 2 * runs <= texts["BEGIN IMMEDIATE"] == texts["COMMIT"] <= 2 * runs + 2
    reread = ("SELECT data FROM events", "SELECT EXISTS")
    assert not [text for text in texts if text.startswith(reread)]
    data = sum(count for text, count in texts.items() if text not in ("BEGIN IMMEDIATE", "COMMIT"))
    assert data <= 8 * runs + 3
