"""Retention per status (``set_retention``/``get_retention``), applied by workers in
the background, and ``Run.pin``/``unpin``, on every world."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from tests.apps.bulkapp import parked
from workflow import (
    RunNotFoundError,
    RunStatus,
    Unique,
    Worker,
    find_run,
    get_retention,
    get_run,
    list_runs,
    prune_runs,
    set_retention,
    start,
    workflow,
)
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@workflow
async def finishes(n: int) -> int:
    if n < 0:
        raise ValueError("negative")
    return n


async def _left(world: World) -> set[str]:
    found: set[str] = set()
    cursor = None
    while True:
        page = await list_runs(limit=1000, cursor=cursor, world=world)
        found |= {run.id for run in page}
        if (cursor := page.next_cursor) is None:
            return found


async def test_retention_settings_round_trip_and_refuse_bad_input(world: World) -> None:
    assert await get_retention(world=world) == {}
    await set_retention("completed", timedelta(days=7), world=world)
    await set_retention(RunStatus.FAILED, timedelta(days=30), world=world)
    assert await get_retention(world=world) == {
        RunStatus.COMPLETED: timedelta(days=7),
        RunStatus.FAILED: timedelta(days=30),
    }
    await set_retention("completed", timedelta(hours=1), world=world)
    await set_retention("failed", None, world=world)
    assert await get_retention(world=world) == {RunStatus.COMPLETED: timedelta(hours=1)}
    with pytest.raises(ValueError, match="open"):
        await set_retention("running", timedelta(days=1), world=world)
    with pytest.raises(ValueError, match="closed status"):
        await set_retention("finished", timedelta(days=1), world=world)
    with pytest.raises(ValueError):
        await set_retention("completed", timedelta(days=-1), world=world)
    with pytest.raises(TypeError):
        await set_retention("completed", 3600, world=world)  # type: ignore[arg-type]
    assert await get_retention(world=world) == {RunStatus.COMPLETED: timedelta(hours=1)}


async def test_workers_prune_exactly_the_runs_past_their_status_window(world: World) -> None:
    async with Worker(world, [finishes], retention_interval=None):
        completed = [await start(finishes, n, world=world) for n in range(60)]
        failed = [
            await start(finishes, -1, attributes={"order": Unique(f"o-{n}")}, world=world)
            for n in range(40)
        ]
        for run in completed + failed:
            with anyio.fail_after(60):
                while not (await run.status()).is_closed:
                    await world.wait(f"run:{run.id}", 0.5)
    cancelled = [await start(parked, n, world=world) for n in range(30)]
    for run in cancelled:
        await run.cancel(grace=None)
    kept_open = [await start(parked, n, world=world) for n in range(5)]
    pinned = [completed[3], failed[5], cancelled[7]]
    for run in pinned:
        await run.pin()
    await set_retention("completed", timedelta(0), world=world)  # past it at once
    await set_retention("failed", timedelta(0), world=world)
    await set_retention("cancelled", timedelta(days=1), world=world)  # none past it
    expected = {r.id for r in cancelled + kept_open} | {r.id for r in pinned}
    async with Worker(world, [parked, finishes], retention_interval=0.2):
        with anyio.fail_after(60):
            while await _left(world) != expected:
                await anyio.sleep(0.2)
    assert await _left(world) == expected
    # the failed runs' claims stay as tombstones; a pinned holder is still there
    tombstone = await find_run("order", "o-1", world=world)
    assert tombstone is not None and tombstone.pruned_status is RunStatus.FAILED
    holder = await find_run("order", "o-5", world=world)
    assert holder is not None and holder.pruned_status is None
    assert (await holder.attributes())["$pinned"] is True
    # unpinned, the next sweep prunes it
    await failed[5].unpin()
    async with Worker(world, [], retention_interval=0.2):
        with anyio.fail_after(60):
            while failed[5].id in await _left(world):
                await anyio.sleep(0.2)
    assert await _left(world) == expected - {failed[5].id}


async def test_a_pinned_run_is_never_pruned_by_hand_either(world: World) -> None:
    runs = [await start(parked, n, world=world) for n in range(10)]
    for run in runs:
        await run.cancel(grace=None)
    await runs[0].pin()
    await runs[0].pin()  # twice: still pinned once
    assert (await runs[0].attributes())["$pinned"] is True
    listed = await list_runs(query="`$pinned` = true", world=world)
    assert [run.id for run in listed] == [runs[0].id]
    future = datetime.now(UTC) + timedelta(days=1)
    pruned = await prune_runs(closed_before=future, world=world)
    assert sorted(pruned) == sorted(run.id for run in runs[1:])
    assert await runs[0].status() is RunStatus.CANCELLED
    await runs[0].unpin()
    assert "$pinned" not in await runs[0].attributes()
    assert await prune_runs(closed_before=future, world=world) == [runs[0].id]
    with pytest.raises(RunNotFoundError):
        await runs[0].pin()
    with pytest.raises(RunNotFoundError):
        await get_run("no-such-run", world=world).unpin()


async def test_a_pinned_open_run_stays_pinned_when_it_closes(world: World) -> None:
    run = await start(parked, 1, world=world)
    control = await start(parked, 2, world=world)
    await run.pin()
    await run.cancel(grace=None)
    await control.cancel(grace=None)
    await set_retention("cancelled", timedelta(0), world=world)
    async with Worker(world, [], retention_interval=0.1):
        with anyio.fail_after(60):
            while control.id in await _left(world):  # the sweep has run
                await anyio.sleep(0.1)
    assert await run.status() is RunStatus.CANCELLED
