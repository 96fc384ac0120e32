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
    create_run,
    lease_all,
    lease_one,
    new_run_id,
    run_with_steps,
)
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    HookCreated,
    ListedReopen,
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
    async def test_reopen_listed_reopens_many_runs_each_on_its_own(self, world: World) -> None:
        """One operation for many runs: a refused run (its hook token held by another
        run) is left unchanged and the others go on; a second call with the same
        ``by`` reopens nothing twice, even a run that closed again in between."""
        failed, cancelled = await _failed_at_step_2(world), await create_run(world)
        await world.cancel_run(cancelled.id, None)
        blocked = await create_run(world)
        created = HookCreated(hook=1, token="listed-tok", attributes={})
        hooked = CommitRequest(run_id=blocked.id, worker_id=WORKER, events=(created,))
        assert (await world.commit(hooked)).ok
        await world.cancel_run(blocked.id, None)
        holder = await create_run(world)
        holding = CommitRequest(run_id=holder.id, worker_id=WORKER, events=(created,))
        assert (await world.commit(holding)).ok
        completed = await create_run(world)
        done = RunCompleted(result=b"")
        closed = CommitRequest(run_id=completed.id, worker_id=WORKER, events=(done,))
        assert (await world.commit(closed)).ok
        unknown = new_run_id()
        listed = [failed, cancelled.id, blocked.id, completed.id, unknown]
        before = await world.read_events(blocked.id)

        first = await world.reopen_listed(listed, "bulk-1")
        assert first[failed] == ListedReopen(status=RunStatus.RUNNING, reopened=True)
        assert first[cancelled.id] == ListedReopen(status=RunStatus.RUNNING, reopened=True)
        refused = first[blocked.id]
        assert refused is not None and refused.status is RunStatus.CANCELLED
        assert not refused.reopened and f"held by run {holder.id}" in (refused.refused or "")
        assert await world.read_events(blocked.id) == before
        assert first[completed.id] == ListedReopen(status=RunStatus.COMPLETED)
        assert first[unknown] is None
        assert list(first) == sorted(listed)

        await world.cancel_run(cancelled.id, "again")
        again = await world.reopen_listed(listed, "bulk-1")
        assert again[failed] == ListedReopen(status=RunStatus.RUNNING, reopened=True)
        assert again[cancelled.id] == ListedReopen(status=RunStatus.CANCELLED, reopened=True)
        log = await world.read_events(failed)
        assert [e.by for e in log if isinstance(e, RunReopened)] == ["bulk-1"]
        other = await world.reopen_listed([cancelled.id], "bulk-2")
        assert other[cancelled.id] == ListedReopen(status=RunStatus.RUNNING, reopened=True)

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
