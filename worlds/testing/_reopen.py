"""Conformance: reopening a failed or cancelled run, and forking a run from a step."""

from __future__ import annotations

import pytest

from worlds.protocol import World
from worlds.testing._base import (
    STEP,
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    lease_all,
    lease_one,
    new_run_id,
    run_with_steps,
)
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    RunCompleted,
    RunFailed,
    RunForked,
    RunReopened,
    RunStatus,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepStarted,
)

__all__ = ["ReopenConformance"]

_ERROR = ErrorInfo(type="RuntimeError", message="broken")


async def _failed_at_step_2(world: World) -> str:
    """A run whose step 1 completed and step 2 failed, then the run failed."""
    run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
    one, two = started.leased
    done = StepCompleted(step=1, attempt=one.attempt, result=b"r1")
    await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=one, events=(done,)))
    failed = StepFailed(step=2, attempt=two.attempt, error=_ERROR)
    await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=two, events=(failed,)))
    await lease_all(world, {WF})  # the wake-up the step outcomes queued
    result = await world.commit(
        CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunFailed(error=_ERROR),))
    )
    assert result.ok and result.status is RunStatus.FAILED
    return run.id


class ReopenConformance(ConformanceBase):
    """``reopen_run`` and ``fork_run`` (``worlds._rules.reopen``)."""

    @pytest.mark.anyio
    async def test_a_failed_run_reopens_and_its_failed_step_is_queued_again(
        self, world: World
    ) -> None:
        run_id = await _failed_at_step_2(world)
        record = await world.reopen_run(run_id, "ops")
        assert record is not None and record.status is RunStatus.RUNNING
        assert record.closed_at is None and record.error is None
        events = await world.read_events(run_id)
        assert_dense(events)
        last = events[-1]
        assert isinstance(last, RunReopened) and (last.by, last.steps) == ("ops", (2,))
        (item,) = await lease_all(world, {STEP})
        assert (item.number, item.attempt, item.payload) == (2, 2, b"")
        started = (await world.read_events(run_id))[-1]
        assert isinstance(started, StepStarted) and started.attempt == 2
        assert (await lease_one(world, WF)).run_id == run_id

    @pytest.mark.anyio
    async def test_only_failed_or_cancelled_runs_reopen(self, world: World) -> None:
        run, _, _ = await run_with_steps(world)
        record = await world.reopen_run(run.id, "ops")
        assert record is not None and record.status is RunStatus.RUNNING
        await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        before = await world.read_events(run.id)
        record = await world.reopen_run(run.id, "ops")
        assert record is not None and record.status is RunStatus.COMPLETED
        assert await world.read_events(run.id) == before
        assert await world.reopen_run(new_run_id(), "ops") is None

    @pytest.mark.anyio
    async def test_a_cancelled_run_reopens_with_its_unfinished_steps(self, world: World) -> None:
        run, _, _ = await run_with_steps(world, steps=1, lease_steps=True)
        await world.cancel_run(run.id, "stop")
        assert await lease_all(world, {STEP}) == []
        record = await world.reopen_run(run.id, "ops")
        assert record is not None and record.status is RunStatus.RUNNING
        (item,) = await lease_all(world, {STEP})
        assert item.number == 1

    @pytest.mark.anyio
    async def test_a_fork_copies_the_log_up_to_the_step_and_queues_it(self, world: World) -> None:
        run_id = await _failed_at_step_2(world)
        fork_id = new_run_id()
        record = await world.fork_run(run_id, fork_id, 2, "ops")
        assert record is not None and record.id == fork_id
        assert record.status is RunStatus.RUNNING
        events = await world.read_events(fork_id)
        assert_dense(events)
        kinds = [type(e).__name__ for e in events]
        assert kinds[:2] == ["RunCreated", "RunStarted"]
        assert [e.step for e in events if isinstance(e, StepCreated)] == [1]
        assert [e.step for e in events if isinstance(e, StepCompleted)] == [1]
        assert not any(isinstance(e, (StepFailed, RunFailed)) for e in events)
        last = events[-1]
        assert isinstance(last, RunForked) and (last.source_run_id, last.from_step) == (run_id, 2)
        source = await world.get_run(run_id)
        assert source is not None and source.status is RunStatus.FAILED
        assert (await lease_one(world, WF)).run_id == fork_id
        with pytest.raises(ValueError):
            await world.fork_run(run_id, new_run_id(), 7, "ops")
        with pytest.raises(ValueError):
            await world.fork_run(run_id, fork_id, 1, "ops")
        assert await world.fork_run(new_run_id(), new_run_id(), 1, "ops") is None
