"""PostgreSQL notifications under concurrent writes (``worlds/postgres/notices.py``).

While a world object has several writes in flight, their notifications are
sent after the commits, in batches. Other world objects (other processes)
must still be woken by them: with ``poll=60`` only a notification can end a
wait within the hang-detection timeouts below.
"""

from __future__ import annotations

import anyio
import pytest

from worlds.postgres import PostgresWorld
from worlds.protocol import WORK_TOPIC, run_topic
from worlds.semantics import new_run_id
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    RunCompleted,
    RunStarted,
    RunStatus,
    WorkItem,
)

pytestmark = pytest.mark.anyio

RUNS = 24


async def test_concurrent_writes_still_wake_other_world_objects(postgres_world_url: str) -> None:
    url = f"{postgres_world_url}&poll=60"
    async with PostgresWorld(url) as writer, PostgresWorld(url) as other:
        await other.wait(WORK_TOPIC, 0)  # subscribes to the work channel
        await other.wait(run_topic("nothing"), 0)  # and to the run channel
        run_ids = [new_run_id() for _ in range(RUNS)]

        async def create(run_id: str) -> None:
            request = CreateRunRequest(run_id=run_id, workflow="w", args=b"")
            assert (await writer.create_run(request)).run is not None

        async with anyio.create_task_group() as group:
            for run_id in run_ids:
                group.start_soon(create, run_id)
        with anyio.fail_after(20):
            await other.wait(WORK_TOPIC, 60)

        items: list[WorkItem] = []
        with anyio.fail_after(20):
            while len(items) < RUNS:
                items += await other.lease("w1", names=["w"], limit=RUNS, lease_seconds=60)

        async def close(index: int) -> None:
            item = items[index]
            events = (RunStarted(), RunCompleted(result=b""))
            request = CommitRequest(run_id=item.run_id, worker_id="w1", lease=item, events=events)
            assert (await writer.commit(request)).ok

        async with anyio.create_task_group() as group:
            for index in range(RUNS):
                group.start_soon(close, index)
        for run_id in run_ids:
            with anyio.fail_after(20):
                await other.wait(run_topic(run_id), 60)
            record = await other.get_run(run_id)
            assert record is not None and record.status is RunStatus.COMPLETED


async def test_a_run_closed_by_the_world_object_that_runs_it_wakes_its_waiters_there(
    postgres_world_url: str,
) -> None:
    """A run started with its workflow leased to this world object's worker and
    closed by its commit: the waiter on the same object is woken by the commit
    itself (``poll=60``: no notification could end the wait within the timeout,
    as none is sent for such a close); another world object reads the run closed."""
    async with (
        PostgresWorld(f"{postgres_world_url}&poll=60") as world,
        PostgresWorld(f"{postgres_world_url}&poll=0.1") as other,
    ):
        request = CreateRunRequest(run_id=new_run_id(), workflow="w", args=b"", lease_to="w1")
        leased = (await world.create_run(request)).leased
        assert leased is not None
        woken = anyio.Event()

        async def waiter() -> None:
            await world.wait(run_topic(request.run_id), 60)
            woken.set()

        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.sleep(0.2)  # the waiter is waiting
            assert not woken.is_set()
            events = (RunStarted(), RunCompleted(result=b"1"))
            commit = CommitRequest(
                run_id=request.run_id, worker_id="w1", lease=leased, events=events
            )
            assert (await world.commit(commit)).ok
            with anyio.fail_after(20):
                await woken.wait()
        record = await other.get_run(request.run_id)
        assert record is not None and record.status is RunStatus.COMPLETED
