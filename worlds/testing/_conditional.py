"""Conformance of conditional commits (one transaction per step): ``expect_seq`` and ``at``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from worlds.protocol import World
from worlds.testing._base import (
    STEP,
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    new_run_id,
    run_with_steps,
)
from worlds.types import (
    AttributeSet,
    CommitRequest,
    CreateRunRequest,
    EventKind,
    FirstTask,
    NewWorkItem,
    RunCompleted,
    RunCreated,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepCreated,
    StepStarted,
    WorkItem,
)

__all__ = ["ConditionalCommitConformance"]


def _outcome(
    item: WorkItem,
    horizon: int,
    *,
    then: tuple[EventKind, ...] = (),
    at: datetime | None = None,
) -> CommitRequest:
    """The step ``item``'s completion with the workflow's next commands ``then``."""
    done = StepCompleted(step=item.number, attempt=item.attempt, result=b"r")
    return CommitRequest(
        run_id=item.run_id,
        worker_id=WORKER,
        lease=item,
        events=(done, *then),
        expect_seq=horizon,
        at=at,
    )


class ConditionalCommitConformance(ConformanceBase):
    """``CommitRequest.expect_seq`` and ``at``: a step's outcome committed with the
    workflow's next commands, refused as ``stale`` if the workflow missed something."""

    @pytest.mark.anyio
    async def test_a_steps_own_records_do_not_make_a_commit_stale(self, world: World) -> None:
        """Only the eager lease's ``StepStarted`` follows what the workflow wrote: the
        outcome and the run's completion are stored together, stamped ``at``."""
        run, _, started = await run_with_steps(world, steps=1, lease_steps=True)
        (item,) = started.leased
        horizon = started.events[-1].seq
        at = world.now() + timedelta(milliseconds=1)
        result = await world.commit(
            _outcome(item, horizon, then=(RunCompleted(result=b"x"),), at=at)
        )
        assert result.ok and not result.stale and result.status is RunStatus.COMPLETED
        log = await world.read_events(run.id)
        assert_dense(log)
        assert isinstance(log[horizon], StepStarted)
        assert [type(e) for e in log[horizon + 1 :]] == [StepCompleted, RunCompleted]
        assert [e.at for e in log[horizon + 1 :]] == [at, at]
        assert [e.seq for e in result.events] == [horizon + 2, horizon + 3]

    @pytest.mark.anyio
    async def test_an_outcome_the_workflow_has_not_seen_makes_it_stale(self, world: World) -> None:
        """Another step's outcome landed after the horizon: nothing is written, the
        lease is still held, and the ordinary commit goes through afterwards."""
        run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
        first, second = sorted(started.leased, key=lambda item: item.number)
        horizon = started.events[-1].seq
        other = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=second,
                events=(StepCompleted(step=2, attempt=1, result=b"r"),),
            )
        )
        assert other.ok
        before = await world.read_events(run.id)
        then = (StepCreated(step=3, name="next", args=b""),)
        stale = await world.commit(_outcome(first, horizon, then=then, at=world.now()))
        assert stale.stale and not stale.ok and stale.events == ()
        assert stale.status is RunStatus.RUNNING
        assert await world.read_events(run.id) == before, "a stale commit wrote something"
        plain = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=first,
                events=(StepCompleted(step=1, attempt=1, result=b"r"),),
            )
        )
        assert plain.ok, "the stale commit must leave the lease with its holder"

    @pytest.mark.anyio
    async def test_a_time_earlier_than_the_log_makes_it_stale(self, world: World) -> None:
        """``at`` before the last event (the eager ``StepStarted``) would make the log's
        times go back: refused as stale."""
        run, _, started = await run_with_steps(world, steps=1, lease_steps=True)
        (item,) = started.leased
        horizon = started.events[-1].seq
        early = started.events[-1].at - timedelta(seconds=5)
        result = await world.commit(_outcome(item, horizon, at=early))
        assert result.stale and not result.ok
        assert_dense(await world.read_events(run.id))

    @pytest.mark.anyio
    async def test_a_runs_first_task_may_come_with_its_creation(self, world: World) -> None:
        """``create_run`` with ``first``: the task's events follow ``RunCreated``, all
        stamped ``first.at``, its step is leased to ``lease_to``, and no workflow
        item waits. A world that ignores ``first`` queues the workflow item instead."""
        at = world.now()
        first = FirstTask(
            events=(RunStarted(), StepCreated(step=1, name=STEP, args=b"")),
            schedule=(NewWorkItem(kind="step", name=STEP, number=1, lease=True),),
            at=at,
        )
        request = CreateRunRequest(
            run_id=new_run_id(), workflow=WF, args=b"", lease_to=WORKER, first=first
        )
        created = await world.create_run(request)
        assert created.run is not None and created.conflict is None
        log = await world.read_events(request.run_id)
        assert_dense(log)
        if created.first is None:
            assert [type(e) for e in log] == [RunCreated]
            (item,) = await world.lease("other", names={WF}, limit=10, lease_seconds=30.0)
            assert item.run_id == request.run_id
            return
        assert created.first.ok and created.first.status is RunStatus.RUNNING
        assert [type(e) for e in log] == [RunCreated, RunStarted, StepCreated, StepStarted]
        assert all(e.at == at for e in log[:3])
        (step,) = created.first.leased
        assert (step.kind, step.number, step.run_id) == ("step", 1, request.run_id)
        assert await world.lease("other", names={WF, STEP}, limit=10, lease_seconds=30.0) == []
        done = await world.commit(_outcome(step, 3, then=(RunCompleted(result=b"x"),)))
        assert done.ok and done.status is RunStatus.COMPLETED

    @pytest.mark.anyio
    async def test_a_steps_attribute_does_not_make_a_commit_stale_a_runs_does(
        self, world: World
    ) -> None:
        """An attribute the step set after the horizon is the step's own record; one
        set by the run itself (no ``step``) is something the workflow would see."""
        for scoped, stale in ((True, False), (False, True)):
            run, _, started = await run_with_steps(world, steps=1, lease_steps=True)
            (item,) = started.leased
            horizon = started.events[-1].seq
            mark = AttributeSet(key="phase", value="busy", step=1 if scoped else None)
            noted = await world.commit(
                CommitRequest(
                    run_id=run.id, worker_id=WORKER, lease=item, events=(mark,), ack=False
                )
            )
            assert noted.ok
            result = await world.commit(_outcome(item, horizon, then=(RunCompleted(result=b"x"),)))
            assert result.stale is stale and result.ok is not stale
            log = await world.read_events(run.id)
            assert_dense(log)
            assert isinstance(log[-1], AttributeSet if stale else RunCompleted)

    @pytest.mark.anyio
    async def test_a_run_may_be_leased_to_its_starter_as_it_is_created(self, world: World) -> None:
        """``create_run`` with ``lease_to``: the workflow item is leased to that worker
        (nobody else can lease it, and its commit is accepted), or, in a world that
        ignores the hint, queued for any worker."""
        request = CreateRunRequest(run_id=new_run_id(), workflow=WF, args=b"", lease_to=WORKER)
        created = await world.create_run(request)
        assert created.run is not None and created.first is None
        assert [type(e) for e in await world.read_events(request.run_id)] == [RunCreated]
        others = await world.lease("other", names={WF}, limit=10, lease_seconds=30.0)
        if created.leased is None:
            assert [item.run_id for item in others] == [request.run_id]
            return
        assert others == []
        item = created.leased
        assert (item.kind, item.run_id, item.name) == ("workflow", request.run_id, WF)
        done = await world.commit(
            CommitRequest(
                run_id=request.run_id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), RunCompleted(result=b"x")),
            )
        )
        assert done.ok and done.status is RunStatus.COMPLETED
