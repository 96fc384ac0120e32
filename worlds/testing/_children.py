"""Conformance: child runs tell their parent when they close, and close with it."""

from __future__ import annotations

import pytest

from worlds.protocol import World
from worlds.semantics import ON_PARENT_CLOSE_KEY, PARENT_KEY
from worlds.testing._base import (
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    create_run,
    lease_all,
    lease_one,
)
from worlds.types import (
    ChildClosed,
    CommitRequest,
    ErrorInfo,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunFailed,
    RunRecord,
    RunStarted,
    RunStatus,
)

__all__ = ["ChildrenConformance"]


async def _running(world: World, run_id: str) -> None:
    """Lease ``run_id``'s workflow item and commit ``RunStarted`` (leaving others queued)."""
    items = await lease_all(world, {WF})
    mine = [item for item in items if item.run_id == run_id]
    assert mine, f"run {run_id} has no workflow item to start"
    others = [item for item in items if item.run_id != run_id]
    await world.release("probe", others)
    result = await world.commit(
        CommitRequest(run_id=run_id, worker_id="probe", lease=mine[0], events=(RunStarted(),))
    )
    assert result.ok, f"starting run {run_id} failed: {result!r}"


async def _child(world: World, parent: RunRecord, mode: str = "cancel") -> RunRecord:
    attributes = {PARENT_KEY: parent.id, ON_PARENT_CLOSE_KEY: mode}
    return await create_run(world, attributes=attributes)


class ChildrenConformance(ConformanceBase):
    """``$parent`` links: ``ChildClosed`` to an open parent; cancel with a failed parent."""

    @pytest.mark.anyio
    async def test_a_closing_child_tells_its_open_parent_and_wakes_it(self, world: World) -> None:
        """The notice is appended in the transaction that closes the child."""
        parent = await create_run(world)
        await _running(world, parent.id)
        child = await _child(world, parent)
        await _running(world, child.id)
        result = await world.commit(
            CommitRequest(run_id=child.id, worker_id=WORKER, events=(RunCompleted(result=b"ok"),))
        )
        assert result.ok
        events = await world.read_events(parent.id)
        assert_dense(events)
        notice = events[-1]
        assert isinstance(notice, ChildClosed)
        assert (notice.run_id, notice.status, notice.result) == (
            child.id,
            RunStatus.COMPLETED,
            b"ok",
        )
        woken = await lease_one(world, WF)
        assert woken.run_id == parent.id

    @pytest.mark.anyio
    async def test_a_failed_or_cancelled_child_says_why(self, world: World) -> None:
        parent = await create_run(world)
        failing, cancelled = await _child(world, parent), await _child(world, parent)
        error = ErrorInfo(type="ValueError", message="bad")
        await world.commit(
            CommitRequest(run_id=failing.id, worker_id=WORKER, events=(RunFailed(error=error),))
        )
        await world.cancel_run(cancelled.id, "no longer needed")
        notices = [e for e in await world.read_events(parent.id) if isinstance(e, ChildClosed)]
        assert [(n.run_id, n.status) for n in notices] == [
            (failing.id, RunStatus.FAILED),
            (cancelled.id, RunStatus.CANCELLED),
        ]
        assert notices[0].error == error
        assert notices[1].reason == "no longer needed"

    @pytest.mark.anyio
    async def test_a_child_that_continues_as_new_names_its_successor(self, world: World) -> None:
        parent = await create_run(world)
        child = await _child(world, parent)
        continued = RunContinued(next_run_id=f"{child.id}-next", args=b"")
        await world.commit(CommitRequest(run_id=child.id, worker_id=WORKER, events=(continued,)))
        (notice,) = [e for e in await world.read_events(parent.id) if isinstance(e, ChildClosed)]
        assert (notice.status, notice.next_run_id) == (RunStatus.CONTINUED, continued.next_run_id)
        successor = await world.get_run(continued.next_run_id)
        assert successor is not None and successor.attributes[PARENT_KEY] == parent.id
        await world.cancel_run(continued.next_run_id, None)
        last = (await world.read_events(parent.id))[-1]
        assert isinstance(last, ChildClosed) and last.run_id == continued.next_run_id

    @pytest.mark.anyio
    async def test_a_closed_parent_gets_no_notice(self, world: World) -> None:
        parent = await create_run(world)
        child = await _child(world, parent, "abandon")
        await world.cancel_run(parent.id, None)
        before = await world.read_events(parent.id)
        await world.cancel_run(child.id, None)
        assert await world.read_events(parent.id) == before

    @pytest.mark.anyio
    async def test_a_failed_parent_cancels_open_children_unless_abandoned(
        self, world: World
    ) -> None:
        """Cancelled in the same transaction, recursively, with the parent named."""
        parent = await create_run(world)
        cancel_kid = await _child(world, parent)
        abandoned = await _child(world, parent, "abandon")
        done_kid = await _child(world, parent)
        grandchild = await _child(world, cancel_kid)
        await world.commit(
            CommitRequest(run_id=done_kid.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        error = ErrorInfo(type="RuntimeError", message="boom")
        await world.commit(
            CommitRequest(run_id=parent.id, worker_id=WORKER, events=(RunFailed(error=error),))
        )
        statuses = {}
        for run in (cancel_kid, abandoned, done_kid, grandchild):
            record = await world.get_run(run.id)
            assert record is not None
            statuses[run.id] = record.status
        assert statuses == {
            cancel_kid.id: RunStatus.CANCELLED,
            abandoned.id: RunStatus.PENDING,
            done_kid.id: RunStatus.COMPLETED,
            grandchild.id: RunStatus.CANCELLED,
        }
        last = (await world.read_events(cancel_kid.id))[-1]
        assert isinstance(last, RunCancelled) and last.reason == f"parent run {parent.id} failed"
        last = (await world.read_events(grandchild.id))[-1]
        assert isinstance(last, RunCancelled)
        assert last.reason == f"parent run {cancel_kid.id} cancelled"
        # the cancelled child told its parent, which had closed: nothing appended there
        assert not any(
            isinstance(e, ChildClosed) and e.run_id == cancel_kid.id
            for e in await world.read_events(parent.id)
        )

    @pytest.mark.anyio
    async def test_cancelling_a_parent_cancels_its_children(self, world: World) -> None:
        parent = await create_run(world)
        await _running(world, parent.id)
        child = await _child(world, parent)
        await world.cancel_run(parent.id, "stop")
        record = await world.get_run(child.id)
        assert record is not None and record.status is RunStatus.CANCELLED

    @pytest.mark.anyio
    async def test_a_completed_parent_leaves_its_children_running(self, world: World) -> None:
        parent = await create_run(world)
        child = await _child(world, parent)
        await world.commit(
            CommitRequest(run_id=parent.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        record = await world.get_run(child.id)
        assert record is not None and record.status is RunStatus.PENDING
