"""Conformance of group commit: ``commit_many`` reports each request's outcome alone."""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    STEP,
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    create_run,
    lease_one,
    poll_lease,
    run_with_steps,
)
from worlds.types import (
    CommitRequest,
    CommitResult,
    RunCompleted,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepDiscarded,
    WorkItem,
)

__all__ = ["BatchCommitConformance"]


def _done(item: WorkItem, *, worker: str = WORKER) -> CommitRequest:
    """Step ``item`` completed, with a discard for a late result."""
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker,
        lease=item,
        events=(StepCompleted(step=item.number, attempt=item.attempt, result=b"r"),),
        discard=StepDiscarded(step=item.number, attempt=item.attempt, outcome="StepCompleted"),
    )


class BatchCommitConformance(ConformanceBase):
    """``commit_many``: one outcome per request, in order, neighbours unaffected."""

    @pytest.mark.anyio
    async def test_each_request_gets_its_own_result(self, world: World) -> None:
        """Runs closed and continued in one batch; each result is the one ``commit``
        would give, and each log is whole."""
        first = await create_run(world)
        second = await create_run(world)
        items = await world.lease(WORKER, names={WF}, limit=10, lease_seconds=30.0)
        by_run = {item.run_id: item for item in items}
        closing = CommitRequest(
            run_id=first.id,
            worker_id=WORKER,
            lease=by_run[first.id],
            events=(RunStarted(), RunCompleted(result=b"1")),
        )
        starting = CommitRequest(
            run_id=second.id, worker_id=WORKER, lease=by_run[second.id], events=(RunStarted(),)
        )
        outcomes = await world.commit_many([closing, starting])
        assert len(outcomes) == 2
        done, started = outcomes
        assert isinstance(done, CommitResult) and done.ok
        assert done.status is RunStatus.COMPLETED
        assert isinstance(started, CommitResult) and started.ok
        assert started.status is RunStatus.RUNNING
        for run in (first, second):
            assert_dense(await world.read_events(run.id))
        assert await world.commit_many([]) == []

    @pytest.mark.anyio
    async def test_a_bad_request_fails_alone(self, world: World) -> None:
        """A commit to an unknown run between two good ones: its outcome is the
        ``LookupError`` that ``commit`` raises, and both neighbours are applied."""
        run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
        one, two = sorted(started.leased, key=lambda item: item.number)
        unknown = CommitRequest(run_id="no-such-run", worker_id=WORKER, events=(RunStarted(),))
        outcomes = await world.commit_many([_done(one), unknown, _done(two)])
        assert isinstance(outcomes[1], LookupError)
        assert all(isinstance(o, CommitResult) and o.ok for o in (outcomes[0], outcomes[2]))
        log = await world.read_events(run.id)
        assert_dense(log)
        assert [e.step for e in log if isinstance(e, StepCompleted)] == [1, 2]

    @pytest.mark.anyio
    async def test_a_stale_lease_in_a_batch_is_fenced(self, world: World) -> None:
        """A zombie's result (its lease expired and was taken over) is refused and
        recorded as discarded; the good commit beside it is applied."""
        run, _, _ = await run_with_steps(world, steps=1)
        zombie = await lease_one(world, STEP, worker="zombie", lease_seconds=0.2)
        await anyio.sleep(0.3)
        (fresh,) = await poll_lease(world, {STEP}, worker="fresh")
        other = await create_run(world)
        other_item = await lease_one(world, WF)
        good = CommitRequest(
            run_id=other.id, worker_id=WORKER, lease=other_item, events=(RunStarted(),)
        )
        outcomes = await world.commit_many([_done(zombie, worker="zombie"), good])
        late, applied = outcomes
        assert isinstance(late, CommitResult) and not late.ok and late.lease_lost
        assert late.lease_holder == "fresh"
        assert isinstance(applied, CommitResult) and applied.ok
        log = await world.read_events(run.id)
        assert not any(isinstance(e, StepCompleted) for e in log)
        assert any(isinstance(e, StepDiscarded) for e in log)
        finished = await world.commit(_done(fresh, worker="fresh"))
        assert finished.ok, "the fresh lease holder commits after the fenced zombie"
