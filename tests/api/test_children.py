"""Child runs: ``start`` inside a workflow, durable waits, parent links, on_parent_close."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    RunCancelledError,
    RunFailedError,
    RunStatus,
    Unique,
    Worker,
    continue_as_new,
    get_run,
    get_run_metadata,
    list_runs,
    replay,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import ChildClosed, ChildConflict, ChildStarted

pytestmark = pytest.mark.anyio

runs_of_ship: dict[str, int] = {}


@step
async def pack(order: str) -> str:
    runs_of_ship[order] = runs_of_ship.get(order, 0) + 1
    return f"packed {order}"


@workflow
async def ship(order: str) -> dict[str, str | None]:
    packed = await pack(order)
    return {"packed": packed, "parent": get_run_metadata().parent_run_id}


@workflow
async def parent(orders: list[str]) -> list[dict[str, str | None]]:
    kids = [await start(ship, o, attributes={"order": Unique(o)}) for o in orders]
    return [await k.result() for k in kids]


@workflow
async def conflicted(order: str) -> str:
    try:
        await start(ship, order, attributes={"order": Unique(order)})
    except AttributeConflictError as exc:
        return f"held by {exc.existing_run.id}"
    return "started"


@workflow
async def waits_forever() -> None:
    await asyncio.sleep(10_000)


@workflow
async def fails_after_children(mode: str) -> None:
    await start(waits_forever, on_parent_close=mode)
    await start(waits_forever)
    raise ValueError("parent gives up")


@workflow
async def waits_on_children() -> None:
    kid = await start(waits_forever)
    await kid.result()


@workflow
async def grandparent() -> None:
    kid = await start(waits_on_children)
    await kid.result()


@workflow
async def impatient() -> str:
    kid = await start(waits_forever)
    try:
        await kid.result(timeout=0.2)
    except TimeoutError:
        return "timed out"
    return "unreachable"


@workflow
async def failing_child() -> None:
    raise RuntimeError("child broke")


@workflow
async def reports_child_failure() -> str:
    kid = await start(failing_child)
    try:
        await kid.result()
    except RunFailedError as exc:
        return f"child failed: {exc}"
    return "unreachable"


@workflow
async def counts_down(n: int) -> int:
    if n > 0:
        continue_as_new(n - 1)
    return 42


@workflow
async def waits_for_chain() -> int:
    kid = await start(counts_down, 3)
    return await kid.result()


async def _wait_status(world: World, run_id: str, status: RunStatus) -> None:
    with anyio.fail_after(10):
        while await get_run(run_id, world=world).status() is not status:
            await anyio.sleep(0.02)


async def _children(world: World, parent_id: str) -> list[str]:
    page = await list_runs(query=f"`$parent` = '{parent_id}'", world=world)
    return sorted(run.id for run in page)


async def test_a_parent_starts_children_and_waits_for_their_results(world: World) -> None:
    runs_of_ship.clear()
    async with Worker(world, [parent, ship, pack]):
        run = await start(parent, ["o-1", "o-2", "o-3"], world=world)
        results = await run.result(timeout=20)
    assert [r["packed"] for r in results] == ["packed o-1", "packed o-2", "packed o-3"]
    assert {r["parent"] for r in results} == {run.id}
    assert runs_of_ship == {"o-1": 1, "o-2": 1, "o-3": 1}
    events = await run.events()
    started = [e for e in events if isinstance(e, ChildStarted)]
    closed = [e for e in events if isinstance(e, ChildClosed)]
    assert [e.child for e in started] == [1, 2, 3]
    assert {e.run_id for e in closed} == {e.run_id for e in started}
    assert all(e.status is RunStatus.COMPLETED for e in closed)
    assert sorted(e.run_id for e in started) == await _children(world, run.id)


async def test_a_unique_conflict_on_a_child_start_is_raised_in_the_parent_and_recorded(
    world: World,
) -> None:
    async with Worker(world, [conflicted, ship, pack]):
        holder = await start(ship, "o-9", attributes={"order": Unique("o-9")}, world=world)
        run = await start(conflicted, "o-9", world=world)
        assert await run.result(timeout=20) == f"held by {holder.id}"
    (conflict,) = [e for e in await run.events() if isinstance(e, ChildConflict)]
    assert (conflict.key, conflict.value, conflict.holder_run_id) == ("order", "o-9", holder.id)
    assert await _children(world, run.id) == []
    # replay answers from the log, whoever holds the pair now
    await replay(conflicted, await run.events(), run_id=run.id)


async def test_a_failing_parent_cancels_its_children_unless_they_are_abandoned(
    world: World,
) -> None:
    async with Worker(world, [fails_after_children, waits_forever]):
        run = await start(fails_after_children, "abandon", world=world)
        with pytest.raises(RunFailedError):
            await run.result(timeout=20)
        kids = await _children(world, run.id)
        assert len(kids) == 2
        statuses = {}
        for kid in kids:
            attrs = await get_run(kid, world=world).attributes()
            statuses[attrs["$on_parent_close"]] = await get_run(kid, world=world).status()
        assert statuses["cancel"] is RunStatus.CANCELLED
        assert statuses["abandon"] in (RunStatus.PENDING, RunStatus.RUNNING)


async def test_cancelling_a_parent_cancels_its_open_children_and_grandchildren(
    world: World,
) -> None:
    async with Worker(world, [grandparent, waits_on_children, waits_forever]):
        run = await start(grandparent, world=world)
        with anyio.fail_after(10):
            while not (kids := await _children(world, run.id)):
                await anyio.sleep(0.02)
            (kid,) = kids
            while not await _children(world, kid):
                await anyio.sleep(0.02)
        (grandkid,) = await _children(world, kid)
        await run.cancel("enough", grace=None)
        await _wait_status(world, kid, RunStatus.CANCELLED)
        await _wait_status(world, grandkid, RunStatus.CANCELLED)
        with pytest.raises(RunCancelledError) as caught:
            await get_run(grandkid, world=world).result(timeout=5)
        assert caught.value.reason == f"parent run {kid} cancelled"


async def test_a_graceful_cancel_of_a_parent_cancels_its_child_when_the_parent_closes(
    world: World,
) -> None:
    async with Worker(world, [waits_on_children, waits_forever]):
        run = await start(waits_on_children, world=world)
        with anyio.fail_after(10):
            while not (kids := await _children(world, run.id)):
                await anyio.sleep(0.02)
        await run.cancel("stop")  # the body gets CancelledError, then the run closes
        with pytest.raises(RunCancelledError):
            await run.result(timeout=20)
        (kid,) = kids
        await _wait_status(world, kid, RunStatus.CANCELLED)


async def test_a_child_failure_reaches_the_parent_as_run_failed_error(world: World) -> None:
    async with Worker(world, [reports_child_failure, failing_child]):
        run = await start(reports_child_failure, world=world)
        outcome = await run.result(timeout=20)
    assert outcome.startswith("child failed:") and "child broke" in outcome


async def test_a_parent_waits_through_a_childs_continue_as_new(world: World) -> None:
    async with Worker(world, [waits_for_chain, counts_down]):
        run = await start(waits_for_chain, world=world)
        assert await run.result(timeout=20) == 42


async def test_waiting_for_a_child_times_out_on_a_durable_timer(world: World) -> None:
    async with Worker(world, [impatient, waits_forever]):
        run = await start(impatient, world=world)
        assert await run.result(timeout=20) == "timed out"
    # the parent completed: its child is left running (a completed parent cancels nothing)
    (kid,) = await _children(world, run.id)
    assert await get_run(kid, world=world).status() in (RunStatus.PENDING, RunStatus.RUNNING)


async def test_on_parent_close_is_checked(world: World) -> None:
    with pytest.raises(ValueError, match="on_parent_close"):
        await start(ship, "x", on_parent_close="terminate", world=world)
