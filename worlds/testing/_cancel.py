"""Conformance: graceful cancellation requests and run deadlines."""

from __future__ import annotations

import pytest

from worlds.protocol import World
from worlds.semantics import CANCEL_DEADLINE_TIMER, RUN_DEADLINE_TIMER
from worlds.testing._base import (
    SHORT_DELAY,
    STEP,
    TIMER,
    WF,
    WORKER,
    ConformanceBase,
    create_run,
    lease_all,
    lease_one,
    new_run_id,
    poll_lease,
    run_with_steps,
    soon,
)
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunStatus,
    StepCreated,
    StepDiscarded,
    WaitCreated,
    utcnow,
)

__all__ = ["CancelConformance"]


class CancelConformance(ConformanceBase):
    """``request_cancel`` gives a running body a grace period; deadlines are timers."""

    @pytest.mark.anyio
    async def test_a_pending_run_is_cancelled_at_once(self, world: World) -> None:
        """Nothing ran yet, so there is nothing to clean up."""
        run = await create_run(world)
        record = await world.request_cancel(run.id, "changed my mind", 30.0)
        assert record is not None and record.status is RunStatus.CANCELLED
        last = (await world.read_events(run.id))[-1]
        assert isinstance(last, RunCancelled) and last.reason == "changed my mind"
        assert await world.request_cancel(new_run_id(), None, 1.0) is None

    @pytest.mark.anyio
    async def test_a_running_run_is_asked_to_clean_up(self, world: World) -> None:
        """Queued work goes, steps in flight are discarded, the body is woken."""
        run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
        in_flight = started.leased[0]
        # step 2's item goes back to the queue; a timer is queued too
        await world.release(WORKER, [started.leased[1]])
        await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                events=(WaitCreated(wait=1, until=soon(60)),),
                schedule=(NewWorkItem(kind="timer", name=TIMER, number=1, available_at=soon(60)),),
            )
        )
        record = await world.request_cancel(run.id, "stop", 30.0)
        assert record is not None and record.status is RunStatus.CANCELLING
        again = await world.request_cancel(run.id, "twice", 30.0)
        assert again is not None and again.last_seq == record.last_seq
        events = await world.read_events(run.id)
        requested = [e for e in events if isinstance(e, RunCancelRequested)]
        assert [e.reason for e in requested] == ["stop"]
        assert requested[0].deadline > requested[0].at
        discarded = [(e.step, e.outcome) for e in events if isinstance(e, StepDiscarded)]
        assert discarded == [(1, "cancelled")]
        assert await world.renew_leases(WORKER, [in_flight], 30.0) == [False]
        assert await lease_all(world, {STEP}) == []
        woken = await lease_one(world, WF)
        assert woken.run_id == run.id
        # the body's cleanup may still schedule steps and finish
        cleanup = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=woken,
                events=(StepCreated(step=3, name=STEP, args=b""),),
                schedule=(NewWorkItem(kind="step", name=STEP, number=3, lease=True),),
            )
        )
        assert cleanup.ok and [item.number for item in cleanup.leased] == [3]
        closed = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCancelled(reason="stop"),))
        )
        assert closed.ok and closed.status is RunStatus.CANCELLED

    @pytest.mark.anyio
    async def test_the_grace_deadline_is_a_timer(self, world: World) -> None:
        """A timer numbered ``CANCEL_DEADLINE_TIMER`` falls due at the deadline."""
        run, _, _ = await run_with_steps(world, steps=0)
        due = soon(SHORT_DELAY)
        await world.request_cancel(run.id, None, SHORT_DELAY)
        early = [i for i in await lease_all(world, {WF}) if i.kind == "timer"]
        if utcnow() < due:  # else a loaded machine took the deadline's time to get here
            assert early == []
        items = early or await poll_lease(world, {WF}, within=30 + SHORT_DELAY)
        deadline = [item for item in items if item.kind == "timer"]
        assert [(i.run_id, i.number) for i in deadline] == [(run.id, CANCEL_DEADLINE_TIMER)]

    @pytest.mark.anyio
    async def test_a_run_deadline_is_a_timer(self, world: World) -> None:
        """``timeout_at`` queues a timer numbered ``RUN_DEADLINE_TIMER``, due then."""
        run_id = new_run_id()
        due = soon(SHORT_DELAY)
        result = await world.create_run(
            CreateRunRequest(run_id=run_id, workflow=WF, args=b"", timeout_at=due)
        )
        assert result.run is not None
        leased = await lease_all(world, {WF}, worker=WORKER)
        assert [item.kind for item in leased if item.kind == "workflow"] == ["workflow"]
        # a loaded machine may take the deadline's time to get here: the timer comes at once
        early = [item for item in leased if item.kind != "workflow"]
        if utcnow() < due:
            assert early == []
        items = early or await poll_lease(world, {WF}, within=30 + SHORT_DELAY)
        assert [(i.kind, i.run_id, i.number) for i in items] == [
            ("timer", run_id, RUN_DEADLINE_TIMER)
        ]

    @pytest.mark.anyio
    async def test_cancel_listed_cancels_many_runs_in_one_operation(self, world: World) -> None:
        """Each listed run as ``request_cancel``/``cancel_run`` would; a closed or
        cancelling run unchanged, an unknown one ``None``."""
        running, _, _ = await run_with_steps(world)  # first: it leases the one workflow item
        pending = [await create_run(world) for _ in range(4)]
        listed = [run.id for run in pending[:3]] + [running.id, "no-such-run"]
        first = await world.cancel_listed(listed, "bulk", 30.0)
        assert first["no-such-run"] is None
        assert all(first[run.id] is RunStatus.CANCELLED for run in pending[:3])
        assert first[running.id] is RunStatus.CANCELLING
        again = await world.cancel_listed(listed, "bulk", 30.0)
        assert again == first
        for run in pending[:3]:
            events = await world.read_events(run.id)
            assert sum(isinstance(e, RunCancelled) for e in events) == 1
        events = await world.read_events(running.id)
        assert sum(isinstance(e, RunCancelRequested) for e in events) == 1
        now = await world.cancel_listed([running.id], None, None)
        assert now == {running.id: RunStatus.CANCELLED}
        untouched = await world.get_run(pending[3].id)
        assert untouched is not None and untouched.status is RunStatus.PENDING
