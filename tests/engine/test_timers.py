"""Durable timers against a fake clock: an hour-long sleep holds no worker and
wakes on time (the memory world takes its clock as a parameter)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import anyio
import pytest

from workflow import RunStatus, Worker, now, start, workflow
from worlds.memory import MemoryWorld
from worlds.types import WaitCompleted, WaitCreated

pytestmark = pytest.mark.anyio


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@workflow
async def naps_an_hour() -> str:
    before = now()
    await asyncio.sleep(3600)
    return f"{(now() - before).total_seconds():.0f}"


@workflow
async def quick(x: int) -> int:
    return x + 1


async def test_an_hour_long_sleep_holds_no_worker_and_wakes_on_time() -> None:
    clock = FakeClock()
    world = MemoryWorld(clock=clock)
    async with Worker(world, [naps_an_hour, quick], concurrency=1, poll_interval=0.05):
        sleeper = await start(naps_an_hour, world=world)
        with anyio.fail_after(5):
            while not any(isinstance(e, WaitCreated) for e in await sleeper.events()):
                await anyio.sleep(0.01)
        # the worker's only slot is free while the run sleeps
        assert await (await start(quick, 1, world=world)).result(timeout=5) == 2
        clock.advance(3599)
        await anyio.sleep(0.3)
        assert await sleeper.status() is RunStatus.RUNNING
        clock.advance(1)
        assert await sleeper.result(timeout=30) == "3600"  # woken at once
    events = await sleeper.events()
    created = next(e for e in events if isinstance(e, WaitCreated))
    fired = next(e for e in events if isinstance(e, WaitCompleted))
    assert created.until - created.at == timedelta(hours=1)
    assert fired.at == created.until


async def test_a_sleep_survives_every_worker_restarting() -> None:
    clock = FakeClock()
    world = MemoryWorld(clock=clock)
    async with Worker(world, [naps_an_hour]):
        sleeper = await start(naps_an_hour, world=world)
        with anyio.fail_after(5):
            while not any(isinstance(e, WaitCreated) for e in await sleeper.events()):
                await anyio.sleep(0.01)
    clock.advance(7200)  # every worker was down when the timer fell due
    async with Worker(world, [naps_an_hour], poll_interval=0.05):
        # it fires as soon as a worker is back; now() says when that was
        assert await sleeper.result(timeout=30) == "7200"
