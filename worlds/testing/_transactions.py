"""Conformance of transaction steps: a step's writes and its outcome in one transaction."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import msgspec
import pytest

from worlds.errors import LeaseLostError, TransactionsUnsupportedError
from worlds.protocol import OpenTransaction, World
from worlds.testing._base import WORKER, ConformanceBase, run_with_steps
from worlds.types import (
    CommitRequest,
    NewWorkItem,
    StepCompleted,
    StepCreated,
    WorkItem,
)

__all__ = ["TransactionConformance"]


def _completed(item: WorkItem, *, expect_seq: int | None = None) -> CommitRequest:
    """The commit of ``item``'s step returning, waking its workflow."""
    return CommitRequest(
        run_id=item.run_id,
        worker_id=WORKER,
        lease=item,
        events=(StepCompleted(step=item.number, attempt=item.attempt, result=b"\xa2ok"),),
        schedule=(NewWorkItem(kind="workflow"),),
        expect_seq=expect_seq,
    )


def _supports(world: World, item: WorkItem) -> bool:
    """Whether ``world`` runs transaction steps; a refusal must be one line naming
    the worlds that do."""
    try:
        world.transaction(item, WORKER)
    except TransactionsUnsupportedError as refusal:
        message = str(refusal)
        assert "\n" not in message and "sqlite://" in message and "postgresql://" in message
        return False
    return True


class _Table:
    """A table of the world's database, written by the transactions of the tests."""

    def __init__(self) -> None:
        self.name = f"conformance_{uuid.uuid4().hex[:12]}"

    async def create(self, tx: OpenTransaction) -> None:
        await tx.execute(f"CREATE TABLE {self.name} (n INTEGER NOT NULL)")

    async def add(self, tx: OpenTransaction) -> None:
        await tx.execute(f"INSERT INTO {self.name} (n) VALUES (1)")

    async def count(self, tx: OpenTransaction) -> int:
        return int((await tx.execute(f"SELECT count(*) FROM {self.name}"))[0][0])


@asynccontextmanager
async def _steps(world: World, count: int) -> AsyncIterator[tuple[list[WorkItem], _Table]]:
    """A run with ``count`` + 1 step items leased as ``WORKER``; the first step's
    transaction created a table (and committed), the others are handed out."""
    _, _, started = await run_with_steps(world, steps=count + 1, lease_steps=True)
    items = sorted(started.leased, key=lambda item: item.number)
    if not _supports(world, items[0]):
        pytest.skip("this world keeps no database: it refuses transaction steps (checked)")
    table = _Table()
    async with world.transaction(items[0], WORKER) as tx:
        await table.create(tx)
        assert (await tx.commit(_completed(items[0]))).ok
    yield items[1:], table


async def _rows(world: World, item: WorkItem, table: _Table) -> int:
    """The table's row count, read in a transaction that commits nothing."""
    async with world.transaction(item, WORKER) as tx:
        return await table.count(tx)


class TransactionConformance(ConformanceBase):
    """``transaction``: writes and outcome commit together, fenced by the lease."""

    @pytest.mark.anyio
    async def test_a_world_without_a_database_refuses_in_one_line(self, world: World) -> None:
        """A world either runs transaction steps or refuses them naming those that do."""
        _, _, started = await run_with_steps(world, steps=1, lease_steps=True)
        (item,) = started.leased
        if _supports(world, item):
            async with world.transaction(item, WORKER) as tx:
                assert await tx.execute("SELECT 1") == [(1,)]

    @pytest.mark.anyio
    async def test_the_writes_commit_with_the_outcome(self, world: World) -> None:
        async with _steps(world, 2) as (items, table):
            step, reader = items
            async with world.transaction(step, WORKER) as tx:
                await table.add(tx)
                await table.add(tx)
                result = await tx.commit(_completed(step))
            assert result.ok
            assert any(
                isinstance(e, StepCompleted) and e.step == step.number for e in result.events
            )
            assert await _rows(world, reader, table) == 2

    @pytest.mark.anyio
    async def test_a_transaction_left_uncommitted_writes_nothing(self, world: World) -> None:
        async with _steps(world, 1) as ((step,), table):
            before = await world.read_events(step.run_id)
            with pytest.raises(RuntimeError, match="the function raised"):
                async with world.transaction(step, WORKER) as tx:
                    await table.add(tx)
                    raise RuntimeError("the function raised")
            assert await world.read_events(step.run_id) == before
            assert await _rows(world, step, table) == 0  # and the lease still holds

    @pytest.mark.anyio
    async def test_a_commit_under_a_lost_lease_writes_nothing(self, world: World) -> None:
        """The commit is fenced: refused, and the transaction's writes go with it."""
        async with _steps(world, 1) as ((step,), table):
            before = await world.read_events(step.run_id)
            stolen = msgspec.structs.replace(step, token=step.token + 1)
            async with world.transaction(step, WORKER) as tx:
                await table.add(tx)
                result = await tx.commit(_completed(stolen))
            assert not result.ok and result.lease_lost
            assert await world.read_events(step.run_id) == before
            assert await _rows(world, step, table) == 0

    @pytest.mark.anyio
    async def test_a_transaction_opens_only_under_its_lease(self, world: World) -> None:
        async with _steps(world, 1) as ((step,), _):
            stolen = msgspec.structs.replace(step, token=step.token + 1)
            with pytest.raises(LeaseLostError):
                async with world.transaction(stolen, WORKER):
                    raise AssertionError("the body of a fenced-out transaction ran")

    @pytest.mark.anyio
    async def test_a_stale_conditional_commit_is_undone_alone(self, world: World) -> None:
        """A conditional commit the log has passed writes nothing, and the transaction
        stays open: the unconditional commit that follows carries the writes."""
        async with _steps(world, 1) as ((step,), table):
            events = await world.read_events(step.run_id)
            async with world.transaction(step, WORKER) as tx:
                await table.add(tx)
                stale = await tx.commit(_completed(step, expect_seq=1))
                assert stale.stale and not stale.ok
                assert (await tx.commit(_completed(step))).ok
            assert await _rows_after(world, step, table) == 1
            assert len(await world.read_events(step.run_id)) > len(events)
            assert any(isinstance(e, StepCreated) for e in events)


async def _rows_after(world: World, committed: WorkItem, table: _Table) -> int:
    """The table's row count once ``committed``'s step is done (its lease gone): read
    under the run's workflow item, leased again by the commit's wake."""
    leased = await world.lease(
        WORKER, names={committed.name, "conformance-wf"}, limit=10, lease_seconds=30.0
    )
    assert leased, "the step's commit woke its workflow"
    workflow_item = next(item for item in leased if item.kind == "workflow")
    async with world.transaction(workflow_item, WORKER) as tx:
        return await table.count(tx)
