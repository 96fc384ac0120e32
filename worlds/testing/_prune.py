"""Conformance of pruning: what ``prune_runs`` deletes, releases, keeps and in what order."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.testing._base import WF, ConformanceBase, create_run, new_run_id
from worlds.types import (
    AttributeSet,
    AttributeValue,
    Claim,
    CommitRequest,
    CreateRunRequest,
    ErrorInfo,
    EventKind,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunRecord,
    RunStarted,
    RunStatus,
    StartPolicy,
    utcnow,
)

__all__ = ["PruneConformance"]


async def _close(world: World, run_id: str, event: EventKind | None = None) -> RunRecord:
    """Close run ``run_id`` (completed unless ``event`` says otherwise)."""
    closing = event or RunCompleted(result=b"")
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="w", events=(closing,)))
    assert result.ok and result.status.is_closed
    record = await world.get_run(run_id)
    assert record is not None and record.closed_at is not None
    return record


async def _claim_in_commit(
    world: World, run_id: str, key: str, value: AttributeValue, step: int | None = None
) -> EventKind:
    """Commit a unique ``AttributeSet`` and return the event it became."""
    attempt = None if step is None else 1
    event = AttributeSet(key=key, value=value, unique=True, step=step, attempt=attempt)
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="w", events=(event,)))
    assert result.ok
    (stored,) = result.events
    return stored


class PruneConformance(ConformanceBase):
    """``prune_runs``: old closed runs go with their logs and claims, oldest first."""

    @pytest.mark.anyio
    async def test_prune_deletes_old_closed_runs_and_releases_their_claims(
        self, world: World
    ) -> None:
        """Only runs closed before the cutoff go, with their logs, attributes and claims;
        every claim path then takes a released pair as free, one generation up."""
        first = await create_run(world, attributes={"order": "o-1", "tag": "old"}, unique=["order"])
        second = await create_run(
            world, attributes={"order": "o-2", "tag": "old"}, unique=["order"]
        )
        await _claim_in_commit(world, first.id, "payment", "p-1", step=1)
        pending = await create_run(world, attributes={"tag": "old"})
        running = await create_run(world, attributes={"tag": "old"})
        await world.commit(CommitRequest(run_id=running.id, worker_id="w", events=(RunStarted(),)))
        # the second closes first, so it is the older of the two
        await _close(world, second.id, RunFailed(error=ErrorInfo(type="E", message="m")))
        await _close(world, first.id, RunCancelled())
        await anyio.sleep(0.01)
        cutoff = utcnow()
        await anyio.sleep(0.01)
        late = await create_run(world, attributes={"order": "o-3", "tag": "old"}, unique=["order"])
        await _close(world, late.id)

        assert await world.prune_runs(cutoff, release_claims=True) == [second.id, first.id]

        for gone in (first, second):
            assert await world.get_run(gone.id) is None
            assert await world.read_events(gone.id) == []
            assert await world.run_claims(gone.id) == []
        kept = {pending.id, running.id, late.id}
        page = await world.list_runs(RunQuery(attributes={"tag": "old"}))
        assert {run.id for run in page.runs} == kept
        assert {run.id for run in (await world.list_runs(RunQuery())).runs} == kept
        for key, value in (("order", "o-1"), ("order", "o-2"), ("payment", "p-1")):
            assert await world.find_claim(key, value) is None, f"{key}={value} still held"
        late_claim = await world.find_claim("order", "o-3")
        assert late_claim is not None and late_claim.run_id == late.id
        assert await world.prune_runs(cutoff, release_claims=True) == []

        # every claim path takes a released pair as free, one generation up
        again = await create_run(world, attributes={"order": "o-1"}, unique=["order"])
        assert await world.run_claims(again.id) == [
            Claim(key="order", value="o-1", run_id=again.id, generation=2)
        ]
        claimed = await _claim_in_commit(world, again.id, "order", "o-2")
        assert isinstance(claimed, AttributeSet) and claimed.generation == 2
        by_step = await _claim_in_commit(world, again.id, "payment", "p-1", step=3)
        assert isinstance(by_step, AttributeSet) and by_step.generation == 2
        assert await world.find_claim("payment", "p-1") == Claim(
            key="payment", value="p-1", run_id=again.id, generation=2, step=3, attempt=1
        )

    @pytest.mark.anyio
    async def test_generations_keep_rising_across_takeovers_and_prunes(self, world: World) -> None:
        """A pair's generation never repeats: a prune does not reset it to 1."""
        holder = await create_run(world, attributes={"order": "o-1"}, unique=["order"])
        for expected in (2, 4):  # a takeover, then a claim after a prune
            await _close(world, holder.id)
            result = await world.create_run(
                CreateRunRequest(
                    run_id=new_run_id(),
                    workflow=WF,
                    args=b"",
                    attributes={"order": "o-1"},
                    unique=frozenset({"order"}),
                    policy=StartPolicy(key="order"),
                )
            )
            assert result.run is not None
            holder = result.run
            claim = await world.find_claim("order", "o-1")
            assert claim is not None and (claim.run_id, claim.generation) == (holder.id, expected)
            await _close(world, holder.id)
            pruned = await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True)
            assert pruned != []
            assert await world.find_claim("order", "o-1") is None
            holder = await create_run(world, attributes={"order": "o-1"}, unique=["order"])
            claim = await world.find_claim("order", "o-1")
            assert claim is not None and claim.generation == expected + 1

    @pytest.mark.anyio
    async def test_prune_respects_its_limit_oldest_first(self, world: World) -> None:
        """``limit`` caps each call; runs go in the order they closed; open runs stay."""
        runs = [await create_run(world) for _ in range(5)]
        for run in reversed(runs):
            await _close(world, run.id)
        await create_run(world)  # open, never pruned
        future = utcnow() + timedelta(days=1)
        closing_order = [run.id for run in reversed(runs)]
        assert await world.prune_runs(future, limit=0) == []
        assert await world.prune_runs(future, limit=2) == closing_order[:2]
        assert await world.prune_runs(future, limit=2) == closing_order[2:4]
        assert await world.prune_runs(future, limit=2) == closing_order[4:]
        assert await world.prune_runs(future) == []
        (left,) = (await world.list_runs(RunQuery())).runs
        assert left.status == RunStatus.PENDING
