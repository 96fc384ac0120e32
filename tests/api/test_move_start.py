"""``Run.start_now()`` and ``Run.set_delay()`` through the public API, on every world."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import anyio
import pytest

from workflow import Limited, RateLimited, RunNotFoundError, RunStatus, Worker, get_run, start
from workflow import workflow as workflow_
from workflow.policies import start_or_debounce
from worlds.protocol import World
from worlds.types import EventKind, RunCreated

pytestmark = pytest.mark.anyio


@workflow_
async def job(n: int) -> int:
    return n


async def _start_at(run_events: Sequence[EventKind]) -> datetime | None:
    created = run_events[0]
    assert isinstance(created, RunCreated)
    return created.start_at


async def test_start_now_runs_a_delayed_run_at_once(world: World) -> None:
    run = await start(job, 1, delay=timedelta(hours=2), world=world)
    async with Worker(world, [job]):
        await anyio.sleep(0.2)
        assert await run.status() is RunStatus.PENDING
        await run.start_now()
        with anyio.fail_after(30):
            assert await run.result() == 1
    assert await _start_at(await run.events()) is None


async def test_start_now_runs_a_debounced_run_at_once(world: World) -> None:
    run = await start_or_debounce(
        job, 2, key="doc", value="d-1", delay=3600, max_delay=7200, world=world
    )
    await run.start_now()
    async with Worker(world, [job]):
        with anyio.fail_after(30):
            assert await run.result() == 2


async def test_set_delay_moves_a_pending_run_later_and_earlier(world: World) -> None:
    run = await start(job, 3, world=world)
    await run.set_delay(timedelta(hours=1))
    start_at = await _start_at(await run.events())
    assert start_at is not None
    async with Worker(world, [job]):
        await anyio.sleep(0.2)
        assert await run.status() is RunStatus.PENDING
        await run.set_delay(0.05)
        with anyio.fail_after(30):
            assert await run.result() == 3


async def test_both_refuse_a_run_that_started(world: World) -> None:
    run = await start(job, 4, world=world)
    async with Worker(world, [job]):
        with anyio.fail_after(30):
            await run.result()
    with pytest.raises(ValueError, match="already started"):
        await run.start_now()
    with pytest.raises(ValueError, match="already started"):
        await run.set_delay(10)
    with pytest.raises(RunNotFoundError):
        await get_run("no-such-run", world=world).start_now()


async def test_bad_delays_are_refused(world: World) -> None:
    run = await start(job, 5, delay=3600, world=world)
    for bad, error in [(-1, ValueError), (float("nan"), ValueError), ("soon", TypeError)]:
        with pytest.raises(error):
            await run.set_delay(bad)  # type: ignore[arg-type]
    assert await _start_at(await run.events()) is not None


async def test_rate_windows_still_apply(world: World) -> None:
    rate = RateLimited("c-1", 1, per=timedelta(hours=1))
    first = await start(job, 6, attributes={"customer": rate}, world=world)
    second = await start(job, 7, attributes={"customer": rate}, world=world)
    before = await _start_at(await second.events())
    await second.start_now()
    assert await _start_at(await second.events()) == before  # its token is the earliest
    delayed = await start(
        job, 8, delay=7200, attributes={"customer": RateLimited("c-2", 1, per=60)}, world=world
    )
    await delayed.start_now()
    assert await _start_at(await delayed.events()) is None  # its window was empty
    async with Worker(world, [job]):
        with anyio.fail_after(30):
            assert await first.result() == 6
            assert await delayed.result() == 8
        assert await second.status() is RunStatus.PENDING


async def test_a_slot_waiter_stays_in_line(world: World) -> None:
    limited = {"tenant": Limited("t-1", 1)}
    await start(job, 9, attributes=limited, world=world)
    waiter = await start(job, 10, attributes=limited, world=world)
    await waiter.start_now()  # still waits for the slot
    holders = await world.list_slots("tenant", "t-1")
    assert [s.holding for s in holders if s.run_id == waiter.id] == [False]
    with pytest.raises(ValueError, match="promoted"):
        await waiter.set_delay(10)
