"""``start(..., priority=n)`` and ``hold(..., priority=n)``: lowest number admitted first."""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import pairwise

import anyio
import pytest

from workflow import Limited, Worker, get_run, hold, list_runs, start, step, workflow
from worlds.protocol import World
from worlds.types import RunCreated, RunStarted

pytestmark = pytest.mark.anyio

order: list[str] = []
opened = {"gate": False}


@step
async def note(name: str) -> None:
    order.append(name)
    while name == "first" and not opened["gate"]:  # the first holder keeps the gate
        await anyio.sleep(0.01)


@workflow
async def queued(name: str) -> str:
    await note(name)
    return name


@workflow
async def gated(name: str, priority: int) -> str:
    async with hold("gate", "g", limit=1, priority=priority):
        await note(name)
    return name


async def _started_at(world: World, run_id: str) -> datetime:
    events = await get_run(run_id, world=world).events()
    (at,) = [event.at for event in events if isinstance(event, RunStarted)]
    return at


async def test_waiting_runs_are_admitted_lowest_priority_first_fifo_within(
    world: World,
) -> None:
    limited = {"tenant": Limited("p-1", 1)}
    first = await start(queued, "holder", attributes=limited, world=world)
    plan = [("low-a", 5), ("high-a", -1), ("mid", 0), ("high-b", -1), ("low-b", 5)]
    runs = [
        await start(queued, name, attributes=limited, priority=p, world=world) for name, p in plan
    ]
    holders = await world.list_slots("tenant", "p-1")
    waiting = [s.run_id for s in holders if not s.holding]
    expected = ["high-a", "high-b", "mid", "low-a", "low-b"]
    ids = {name: run.id for (name, _), run in zip(plan, runs, strict=True)}
    assert waiting == [ids[name] for name in expected]  # listed in admission order
    async with Worker(world, [queued], concurrency=4):
        with anyio.fail_after(60):
            await first.result()
            for run in runs:
                await run.result()
    started = [await _started_at(world, ids[name]) for name in expected]
    assert started == sorted(started)
    created = (await runs[1].events())[0]
    assert isinstance(created, RunCreated) and created.priority == -1


async def test_hold_waiters_go_by_priority(world: World) -> None:
    order.clear()
    opened["gate"] = False
    async with Worker(world, [gated], concurrency=8):
        blocker = await start(gated, "first", 0, world=world)
        with anyio.fail_after(30):
            while "first" not in order:
                await anyio.sleep(0.01)
        # "first" holds the gate until it is opened; the others queue behind it
        rest = []
        for name, p in [("c", 3), ("a", -2), ("b", 0), ("d", 3)]:
            rest.append(await start(gated, name, p, world=world))
            with anyio.fail_after(30):  # in line before the next arrives: FIFO is testable
                while len(await world.list_slots("gate", "g")) < len(rest) + 1:
                    await anyio.sleep(0.01)
        opened["gate"] = True
        with anyio.fail_after(60):
            await blocker.result()
            for run in rest:
                await run.result()
    assert order == ["first", "a", "b", "c", "d"]


@pytest.mark.parametrize("bad", [1.5, "1", True, None, 2**40])
async def test_a_bad_priority_is_refused_and_nothing_written(world: World, bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        await start(queued, "x", priority=bad, world=world)  # type: ignore[arg-type]
    assert len(await list_runs(world=world)) == 0


async def test_a_lower_number_passes_runs_waiting_for_rate_tokens(world: World) -> None:
    from workflow import RateLimited

    rate = {"customer": RateLimited("c-p", 1, per=3600)}
    await start(queued, "now", attributes=rate, world=world)
    plan = [("a", 0), ("b", 0), ("urgent", -1), ("c", 0)]
    runs = {
        name: await start(queued, name, attributes=rate, priority=p, world=world)
        for name, p in plan
    }
    starts = {}
    for name, run in runs.items():
        created = (await run.events())[0]
        assert isinstance(created, RunCreated) and created.start_at is not None
        starts[name] = created.start_at
    assert sorted(starts, key=starts.__getitem__) == ["urgent", "a", "b", "c"]
    gaps = sorted(starts.values())
    assert all(later - earlier >= timedelta(hours=1) for earlier, later in pairwise(gaps))
