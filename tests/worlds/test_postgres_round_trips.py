"""PostgreSQL round trips: each world operation a 1-step workflow needs is one.

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
from worlds.postgres import PostgresWorld
from worlds.semantics import new_run_id
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    NewWorkItem,
    RunCompleted,
    RunQuery,
    RunStarted,
    RunStatus,
    StepCompleted,
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
