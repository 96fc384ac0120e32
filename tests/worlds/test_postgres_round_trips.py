"""PostgreSQL round trips: each world operation a 1-step workflow needs is one, and
a 1-step workflow started beside its worker takes at most 4.

Round trips are counted on the wire (``tests/pg_round_trips.RoundTripProxy``
counts the server's ``ReadyForQuery`` messages), with a pool of one connection
so that statements prepared in the warm-up are reused. The operations are the
ones the worker and the client call for a 1-step workflow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from typing import TypeVar

import asyncpg
import pytest

from tests.conftest import fresh_schema
from tests.pg_round_trips import RoundTripProxy, server_address
from workflow import Worker, start, step, workflow
from worlds.postgres import PostgresWorld
from worlds.query import RunQuery
from worlds.semantics import new_run_id
from worlds.types import (
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    FirstTask,
    NewWorkItem,
    RunCompleted,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepCreated,
    utcnow,
)

pytestmark = pytest.mark.anyio

T = TypeVar("T")


@pytest.fixture
async def counted(postgres_url: str) -> AsyncIterator[tuple[PostgresWorld, RoundTripProxy]]:
    """A world in a fresh schema whose one pooled connection goes through a proxy."""
    host, port = server_address(postgres_url)
    async with RoundTripProxy(host, port) as proxy:
        url = f"{proxy.url()}&pool_size=1&schema={fresh_schema()}"
        world = PostgresWorld(url)
        async with world:
            yield world, proxy
        conn = await asyncpg.connect(world.dsn)
        try:
            await conn.execute(f'DROP SCHEMA "{world.schema}" CASCADE')
        finally:
            await conn.close()


async def _trips(proxy: RoundTripProxy, call: Awaitable[T]) -> tuple[T, int]:
    before = proxy.round_trips
    result = await call
    return result, proxy.round_trips - before


async def _one_step_workflow(world: PostgresWorld, proxy: RoundTripProxy) -> dict[str, int]:
    """A 1-step workflow's world operations, as a worker and a client call them."""
    trips: dict[str, int] = {}
    run_id = new_run_id()
    request = CreateRunRequest(run_id=run_id, workflow="w", args=b"")
    _, trips["create_run"] = await _trips(proxy, world.create_run(request))
    lease = world.lease("worker", names=["w"], limit=8, lease_seconds=30)
    items, trips["lease"] = await _trips(proxy, lease)
    (task,) = [item for item in items if item.run_id == run_id]
    _, trips["read_events"] = await _trips(proxy, world.read_events(run_id))
    schedule = NewWorkItem(kind="step", name="s", number=1, payload=b"", lease=True)
    started = CommitRequest(
        run_id=run_id,
        worker_id="worker",
        lease=task,
        events=(RunStarted(),),
        schedule=(schedule,),
        lease_seconds=30,
    )
    result, trips["commit_task"] = await _trips(proxy, world.commit(started))
    (step,) = result.leased
    completed = CommitRequest(
        run_id=run_id,
        worker_id="worker",
        lease=step,
        events=(StepCompleted(step=1, attempt=1, result=b"1"),),
        schedule=(NewWorkItem(kind="workflow", lease=True),),
        lease_seconds=30,
    )
    result, trips["commit_step"] = await _trips(proxy, world.commit(completed))
    (task,) = result.leased
    _, trips["read_new_events"] = await _trips(proxy, world.read_events(run_id, 3))
    closing = CommitRequest(
        run_id=run_id, worker_id="worker", lease=task, events=(RunCompleted(result=b"1"),)
    )
    _, trips["commit_close"] = await _trips(proxy, world.commit(closing))
    record, trips["get_run"] = await _trips(proxy, world.get_run(run_id))
    assert record is not None and record.status is RunStatus.COMPLETED
    return trips


async def test_each_operation_of_a_one_step_workflow_is_one_round_trip(
    counted: tuple[PostgresWorld, RoundTripProxy],
) -> None:
    world, proxy = counted
    await _one_step_workflow(world, proxy)  # warm-up: connect, prepare statements
    trips = await _one_step_workflow(world, proxy)
    assert trips == dict.fromkeys(trips, 1), trips


async def test_a_start_with_unique_pairs_and_a_deadline_is_one_round_trip(
    counted: tuple[PostgresWorld, RoundTripProxy],
) -> None:
    world, proxy = counted

    def request(n: int) -> CreateRunRequest:
        return CreateRunRequest(
            run_id=new_run_id(),
            workflow="w",
            args=b"",
            attributes={"order": f"o-{n}", "key": n, "tenant": "t"},
            unique=frozenset({"order", "key"}),
            timeout_at=utcnow() + timedelta(hours=1),
        )

    await world.create_run(request(0))  # warm-up
    created, trips = await _trips(proxy, world.create_run(request(1)))
    assert trips == 1
    assert created.run is not None and created.conflict is None
    claim = await world.find_claim("order", "o-1")
    assert claim is not None and claim.run_id == created.run.id
    page = await world.list_runs(RunQuery(attributes={"tenant": "t", "key": 1}))
    assert [run.id for run in page.runs] == [created.run.id]
    held, _ = await _trips(proxy, world.create_run(request(1)))
    assert held.run is None and held.conflict is not None
    assert held.conflict.holder_run_id == created.run.id


def _eager_start(world: PostgresWorld) -> CreateRunRequest:
    """A start carrying its run's first workflow task, which schedules one step."""
    first = FirstTask(
        events=(RunStarted(), StepCreated(step=1, name="s", args=b"")),
        schedule=(NewWorkItem(kind="step", name="s", number=1, payload=b"", lease=True),),
        at=world.now(),
    )
    return CreateRunRequest(
        run_id=new_run_id(), workflow="w", args=b"", lease_to="worker", first=first
    )


def _step_and_close(request: CreateRunRequest, created: CreateRunResult) -> CommitRequest:
    """The step's outcome with the run's completion, conditional on the first task."""
    assert created.first is not None and created.first.ok
    (step,) = created.first.leased
    return CommitRequest(
        run_id=request.run_id,
        worker_id="worker",
        lease=step,
        events=(StepCompleted(step=1, attempt=1, result=b"1"), RunCompleted(result=b"1")),
        expect_seq=created.first.events[-1].seq,
        at=created.first.events[-1].at,
    )


async def _eager_one_step_workflow(
    world: PostgresWorld, proxy: RoundTripProxy
) -> tuple[dict[str, int], CreateRunRequest]:
    """A 1-step workflow as the engine runs it when the starter has a worker: the
    start carries the first task (its step leased), and the step's outcome is
    committed with the run's completion, conditionally."""
    trips: dict[str, int] = {}
    request = _eager_start(world)
    created, trips["create_run"] = await _trips(proxy, world.create_run(request))
    assert created.first is not None and created.first.ok
    done = _step_and_close(request, created)
    result, trips["commit_step_and_close"] = await _trips(proxy, world.commit(done))
    assert result.ok and not result.stale
    record, trips["get_run"] = await _trips(proxy, world.get_run(request.run_id))
    assert record is not None and record.status is RunStatus.COMPLETED
    return trips, request


async def test_an_eager_start_and_a_conditional_commit_are_one_round_trip_each(
    counted: tuple[PostgresWorld, RoundTripProxy],
) -> None:
    world, proxy = counted
    await _eager_one_step_workflow(world, proxy)  # warm-up
    trips, request = await _eager_one_step_workflow(world, proxy)
    assert trips == dict.fromkeys(trips, 1), trips
    log = await world.read_events(request.run_id)
    assert [type(event).__name__ for event in log] == [
        "RunCreated",
        "RunStarted",
        "StepCreated",
        "StepStarted",
        "StepCompleted",
        "RunCompleted",
    ]


async def test_a_start_leased_to_its_worker_is_one_round_trip(
    counted: tuple[PostgresWorld, RoundTripProxy],
) -> None:
    world, proxy = counted
    for _ in range(2):  # the first is the warm-up
        request = CreateRunRequest(run_id=new_run_id(), workflow="w", args=b"", lease_to="me")
        created, trips = await _trips(proxy, world.create_run(request))
    assert trips == 1
    assert created.leased is not None and created.leased.run_id == request.run_id
    assert await world.lease("other", names=["w"], limit=8, lease_seconds=30) == []


async def test_a_batch_of_commits_is_one_round_trip_with_an_outcome_each(
    counted: tuple[PostgresWorld, RoundTripProxy],
) -> None:
    """Eight runs' step outcomes, one of them stale (its log gained an event after
    its horizon), in one call: seven committed, one refused."""
    world, proxy = counted
    for _ in range(2):  # the first is the warm-up
        batch = []
        for _ in range(8):
            request = _eager_start(world)
            batch.append(_step_and_close(request, await world.create_run(request)))
        # run 3's log gains an event its workflow has not seen
        seen = StepCreated(step=2, name="s", args=b"")
        late = CommitRequest(run_id=batch[3].run_id, worker_id="other", events=(seen,))
        assert (await world.commit(late)).ok
        outcomes, trips = await _trips(proxy, world.commit_many(batch))
    assert trips == 1
    stale = [n == 3 for n in range(8)]
    assert [isinstance(o, CommitResult) and o.stale for o in outcomes] == stale
    for commit, outcome, refused in zip(batch, outcomes, stale, strict=True):
        record = await world.get_run(commit.run_id)
        assert isinstance(outcome, CommitResult) and record is not None
        assert outcome.ok is not refused
        assert record.status is (RunStatus.RUNNING if refused else RunStatus.COMPLETED)


@step
async def add_one(x: int) -> int:
    return x + 1


@workflow
async def one_step(x: int) -> int:
    return await add_one(x)


async def test_a_one_step_workflow_takes_at_most_three_round_trips(postgres_url: str) -> None:
    """Started beside its worker and awaited, through the public API: the start
    (with the first task), the step's outcome with the run's completion, and
    the client's one read of the run after its wait (the run was pending at its
    start, and the world object that closes it wakes the client itself). Long
    polls (the world's, and the worker's for work and schedules) and a long
    lease (renewals) keep background calls out of the count, and make a missed
    wake-up fail the test (the client would wait 60 s)."""
    host, port = server_address(postgres_url)
    async with RoundTripProxy(host, port) as proxy:
        world = PostgresWorld(f"{proxy.url()}&poll=60&schema={fresh_schema()}")
        async with world, Worker(world, [one_step], poll_interval=60, lease_seconds=300):
            for i in range(5):  # warm-up: connections, prepared statements
                assert await (await start(one_step, i, world=world)).result(timeout=30) == i + 1
            n, batches = 20, []
            for _ in range(3):  # a busy machine adds spurious wake-ups: the best batch counts
                before = proxy.round_trips
                for i in range(n):
                    assert await (await start(one_step, i, world=world)).result(timeout=30) == i + 1
                batches.append(proxy.round_trips - before)
            trips = min(batches)
        conn = await asyncpg.connect(world.dsn)
        try:
            await conn.execute(f'DROP SCHEMA "{world.schema}" CASCADE')
        finally:
            await conn.close()
    assert trips <= 3 * n, trips / n
