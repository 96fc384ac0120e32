"""The PostgreSQL world locks runs (and their work items) in one order: by run id.

Two transactions that lock the same two runs in opposite orders deadlock; the
server breaks the tie by undoing one of them. Each test holds the lower run's
lock in a transaction of its own (as any path locking by run id would), lets the
world start an operation on both runs given in the other order, and then takes
the higher run's lock: a world that locked the higher run first deadlocks with
it (this transaction's ``deadlock_timeout`` is the shorter, so it is the one
undone); a world that locks by run id waits on the lower one, holding nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import asyncpg
import pytest

from worlds.errors import WorldDeadlockError, WorldUnavailableError, as_world_error
from worlds.postgres import PostgresWorld
from worlds.testing._base import WF, create_run, lease_all
from worlds.types import AttributeSet, CommitRequest, EventKind, RunStarted, WorkItem

pytestmark = pytest.mark.anyio


async def _two_leased(world: PostgresWorld) -> tuple[WorkItem, WorkItem]:
    """Two runs' workflow items leased to ``w``, the lower run id first."""
    for _ in range(2):
        await create_run(world)
    low, high = sorted(await lease_all(world, {WF}, worker="w"), key=lambda i: i.run_id)
    return low, high


async def _while_waiting(
    world: PostgresWorld, low: WorkItem, high: WorkItem, table: str, operation: Awaitable[object]
) -> object:
    """Run ``operation`` while another transaction holds ``low``'s row of ``table``,
    then take ``high``'s; the operation's answer."""
    key = "id" if table == "runs" else "run_id"
    conn = await asyncpg.connect(world.dsn)
    answer: list[object] = []
    try:
        await conn.execute(f'SET search_path = "{world.schema}"')
        await conn.execute("SET deadlock_timeout = '100ms'")  # shorter than the world's
        async with anyio.create_task_group() as group, conn.transaction():
            # the transaction commits before the group waits for the operation
            await conn.execute(f"SELECT 1 FROM {table} WHERE {key} = $1 FOR UPDATE", low.run_id)

            async def call() -> None:
                answer.append(await operation)

            group.start_soon(call)
            with anyio.fail_after(10):  # until the world's transaction waits for a lock
                while not await conn.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> pg_backend_pid()"
                ):
                    await anyio.sleep(0.01)
            # a world holding the high run's row now deadlocks with this statement
            await conn.execute(f"SELECT 1 FROM {table} WHERE {key} = $1 FOR UPDATE", high.run_id)
    finally:
        await conn.close()
    return answer[0]


def _requests(
    low: WorkItem, high: WorkItem, events: Callable[[], tuple[EventKind, ...]]
) -> list[CommitRequest]:
    return [  # the higher run first
        CommitRequest(run_id=item.run_id, worker_id="w", lease=item, events=events())
        for item in (high, low)
    ]


@pytest.mark.parametrize("path", ["commit_runs", "general"])
async def test_a_batch_of_commits_locks_its_runs_by_run_id(
    postgres_world_url: str, path: str
) -> None:
    """``commit_many`` through the one-call ``commit_runs`` function and through the
    general flow (a run attribute: one transaction, a savepoint per request)."""

    def events() -> tuple[EventKind, ...]:
        if path == "general":
            return (RunStarted(), AttributeSet(key="k", value="v"))
        return (RunStarted(),)

    async with PostgresWorld(postgres_world_url) as world:
        low, high = await _two_leased(world)
        batch = _requests(low, high, events)
        outcomes = await _while_waiting(world, low, high, "runs", world.commit_many(batch))
        assert isinstance(outcomes, list)
        assert [getattr(o, "lease_lost", o) for o in outcomes] == [False, False]
        for item in (low, high):
            assert [type(e) for e in await world.read_events(item.run_id)][-1] in (
                RunStarted,
                AttributeSet,
            )


@pytest.mark.parametrize("operation", ["renew", "release"])
async def test_renewing_and_releasing_lock_work_items_by_run_id(
    postgres_world_url: str, operation: str
) -> None:
    async with PostgresWorld(postgres_world_url) as world:
        low, high = await _two_leased(world)
        call = (
            world.renew_leases("w", [high, low], 30.0)
            if operation == "renew"
            else world.release("w", [high, low])
        )
        answer = await _while_waiting(world, low, high, "work", call)
        if operation == "renew":
            assert answer == [True, True]
        else:
            assert len(await lease_all(world, {WF}, worker="other")) == 2


async def test_a_deadlock_the_server_breaks_is_named_as_one(postgres_world_url: str) -> None:
    """Not "the world is unavailable": ``WorldDeadlockError`` says what happened, and
    is transient (a ``WorldUnavailableError``), so callers retry it."""
    async with PostgresWorld(postgres_world_url) as world:
        low, high = await _two_leased(world)
        first, second = [await asyncpg.connect(world.dsn) for _ in range(2)]
        errors: list[BaseException] = []
        try:
            for conn in (first, second):
                await conn.execute(f'SET search_path = "{world.schema}"')
            lock = "SELECT 1 FROM runs WHERE id = $1 FOR UPDATE"

            async def both(conn: asyncpg.Connection, one: str, other: str) -> None:
                try:
                    async with conn.transaction():
                        await conn.execute(lock, one)
                        await anyio.sleep(0.3)
                        await conn.execute(lock, other)
                except asyncpg.PostgresError as exc:
                    errors.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(both, first, low.run_id, high.run_id)
                group.start_soon(both, second, high.run_id, low.run_id)
        finally:
            for conn in (first, second):
                await conn.close()
    assert len(errors) == 1
    named = as_world_error(errors[0])
    assert isinstance(named, WorldDeadlockError)
    assert isinstance(named, WorldUnavailableError)
    assert "deadlock" in str(named) and "retried" in str(named)
