"""Schedules due at one instant fire in one batch, each once, on every world.

A worker hands the rounds of the schedules it leased to the world in batches
(``World.fire_schedules``: one transaction for every due fire of a batch);
the world starts each fire once, whoever else races it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import anyio
import pytest

from workflow import RunStatus, Worker, list_runs, workflow
from workflow.schedules import Overlap, create_schedule
from worlds.protocol import World
from worlds.types import ScheduleFire, ScheduleRecord
from worlds.wrapper import WorldWrapper

pytestmark = pytest.mark.anyio

SCHEDULES = 40


@workflow
async def tick(n: int) -> int:
    return n


class Batches(WorldWrapper):
    """A world that records the fire times of each ``fire_schedules`` call."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.calls: list[list[tuple[str, datetime]]] = []

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        self.calls.append([(fire.record.id, each.at) for fire in fires for each in fire.fires])
        return await self.inner.fire_schedules(fires)


async def _fires(world: World) -> list[tuple[str, datetime, RunStatus]]:
    found = []
    for run in await list_runs(workflow=tick, limit=1000, world=world):
        attributes = await run.attributes()
        at = attributes["$scheduled_at"]
        assert isinstance(at, datetime)
        found.append((str(attributes["$schedule"]), at, await run.status()))
    return found


async def test_schedules_due_at_one_instant_fire_once_each_in_one_batch(world: World) -> None:
    for n in range(SCHEDULES):
        await create_schedule(tick, n, id=f"batch-{n:02d}", every=timedelta(seconds=2), world=world)
    batches = Batches(world)
    async with Worker(batches, [tick], poll_interval=0.05):
        with anyio.fail_after(60):
            while True:
                fires = await _fires(world)
                by_time: dict[datetime, int] = {}
                for _, at, _ in fires:
                    by_time[at] = by_time.get(at, 0) + 1
                if any(count == SCHEDULES for count in by_time.values()):
                    break
                await anyio.sleep(0.1)
    fires = await _fires(world)
    keys = [(schedule, at) for schedule, at, _ in fires]
    assert len(keys) == len(set(keys))  # no fire twice
    instant = next(at for at, count in sorted(by_time.items()) if count == SCHEDULES)
    # every schedule's fire of that instant went to the world in one call
    carrying = [call for call in batches.calls if any(at == instant for _, at in call)]
    assert len(carrying) == 1
    assert sorted(s for s, at in carrying[0] if at == instant) == [
        f"batch-{n:02d}" for n in range(SCHEDULES)
    ]


class Twice(WorldWrapper):
    """A world that applies every ``fire_schedules`` batch twice (a retry after a
    lost answer) and keeps the second call's outcomes."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.repeated: list[ScheduleRecord | Exception | None] = []

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        first = await self.inner.fire_schedules(fires)
        self.repeated += await self.inner.fire_schedules(fires)
        return first


async def test_a_batch_applied_twice_starts_each_fire_once(world: World) -> None:
    for n in range(3):
        await create_schedule(
            tick,
            n,
            id=f"again-{n}",
            every=timedelta(seconds=1),
            overlap=Overlap.ALLOW_ALL,
            world=world,
        )
    twice = Twice(world)
    async with Worker(twice, [tick], poll_interval=0.05):
        with anyio.fail_after(30):
            while len({s for s, _, _ in await _fires(world)}) < 3:
                await anyio.sleep(0.05)
    keys = [(schedule, at) for schedule, at, _ in await _fires(world)]
    assert len({schedule for schedule, _ in keys}) == 3
    assert len(keys) == len(set(keys))
    # the schedules moved on with the first call: the repeat finds them changed
    assert twice.repeated and all(outcome is None for outcome in twice.repeated)
