"""Conformance of ``World.wait_idle``: an idle poller's wait ends whenever its poll could
find something (RFC 0018, "Idle cost").

A world may keep an idle caller waiting past its timeout while it can tell that
the caller's poll would still find nothing; these tests hold it to ending the
wait when that stops being true: work created through another world object over
the same storage, a timer coming due, a schedule created elsewhere. The bounds
are hang detectors, far beyond a healthy machine's need; the timeout passed is
longer than each, so a wait that ends in time ended for the right reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

import anyio
import pytest

from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC, World, run_topic
from worlds.testing._base import (
    SHORT_DELAY,
    TIMER,
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    create_run,
    lease_all,
    open_worlds,
    run_with_steps,
    soon,
)
from worlds.types import CommitRequest, NewWorkItem, ScheduleRecord, WaitCreated, utcnow

__all__ = ["IdleWaitConformance"]

LONG = 60.0
"""The timeout the tests pass: longer than any wait they expect to end."""

WITHIN = 20.0
"""How long a wait that should end may take: a hang detector."""


async def _idle(world: World, topic: str, names: set[str]) -> None:
    """Poll as an idle worker does until the poll finds nothing twice (remembered)."""
    for _ in range(2):
        if topic == WORK_TOPIC:
            assert await lease_all(world, names) == []
        else:
            lease = await world.lease_schedules(WORKER, names=names, limit=10, lease_seconds=10.0)
            assert lease.schedules == ()


async def _ends_when(waiting: World, topic: str, action: Callable[[], Awaitable[object]]) -> None:
    """``wait_idle`` on ``topic`` (of ``WF``) ends once ``action`` ran, 0.3 s into it."""

    async def later() -> None:
        await anyio.sleep(0.3)
        await action()

    async with anyio.create_task_group() as group:
        group.start_soon(later)
        with anyio.fail_after(WITHIN):
            await waiting.wait_idle(topic, [WF], LONG)


class IdleWaitConformance(ConformanceBase):
    """``wait_idle`` ends when a poll could find something, however long its timeout."""

    @pytest.mark.anyio
    async def test_wait_idle_ends_when_another_world_object_creates_work(
        self, world_factory: WorldFactory
    ) -> None:
        """A run created through another object (as another process would) ends it."""
        async with open_worlds(world_factory, 2) as (waiting, other):
            await _idle(waiting, WORK_TOPIC, {WF})
            await _ends_when(waiting, WORK_TOPIC, lambda: create_run(other))
            assert [item.name for item in await lease_all(waiting, {WF})] == [WF]

    @pytest.mark.anyio
    async def test_wait_idle_ends_when_a_timer_comes_due(self, world: World) -> None:
        """An idle poll that saw a timer not yet due waits no later than its due time."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        until = soon(SHORT_DELAY)
        timer = NewWorkItem(kind="timer", name=TIMER, number=1, available_at=until)
        commit = CommitRequest(
            run_id=run.id,
            worker_id=WORKER,
            lease=item,
            events=(WaitCreated(wait=1, until=until),),
            schedule=(timer,),
        )
        assert (await world.commit(commit)).ok
        await _idle(world, WORK_TOPIC, {TIMER})
        with anyio.fail_after(WITHIN):
            while utcnow() < until:  # a spurious early return is allowed: wait again
                await world.wait_idle(WORK_TOPIC, [TIMER], LONG)
        with anyio.fail_after(WITHIN):
            while not await lease_all(world, {TIMER}):
                await world.wait_idle(WORK_TOPIC, [TIMER], 0.05)

    @pytest.mark.anyio
    async def test_wait_idle_ends_when_another_world_object_creates_a_schedule(
        self, world_factory: WorldFactory
    ) -> None:
        """A schedule created elsewhere that is due ends the schedule poll's wait."""
        async with open_worlds(world_factory, 2) as (waiting, other):
            await _idle(waiting, SCHEDULE_TOPIC, {WF})
            due = utcnow() - timedelta(seconds=1)
            record = ScheduleRecord(
                id="idle-wait", workflow=WF, spec=b"\x01spec", next_fire_at=due, wake_at=due
            )
            await _ends_when(waiting, SCHEDULE_TOPIC, lambda: other.create_schedule(record))
            lease = await waiting.lease_schedules(WORKER, names={WF}, limit=10, lease_seconds=10.0)
            assert [s.id for s in lease.schedules] == ["idle-wait"]

    @pytest.mark.anyio
    async def test_wait_idle_on_another_topic_is_wait(self, world: World) -> None:
        """No poll waits on a run's topic: ``wait_idle`` returns by its timeout there."""
        with anyio.fail_after(WITHIN):
            await world.wait_idle(run_topic("nobody"), [WF], 0.2)
