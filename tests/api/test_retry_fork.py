"""``Run.retry`` reopens a failed or cancelled run; ``Run.fork`` replays it up to a step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from workflow import (
    Limited,
    Run,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
    RunStatus,
    StepFailedError,
    Unique,
    Worker,
    continue_as_new,
    create_hook,
    get_run,
    hold,
    list_hooks,
    list_runs,
    resume_hook,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import RunForked, RunReopened, StepCompleted, StepStarted

pytestmark = pytest.mark.anyio

ran: list[int] = []
broken: set[int] = set()


@step(max_retries=1, retry_delay=0.0)
async def stage(n: int, total: int) -> int:
    ran.append(n)
    if n in broken:
        raise RuntimeError(f"stage {n} is broken")
    return total + n


@workflow
async def five_stages() -> int:
    total = 0
    for n in range(1, 6):
        total = await stage(n, total)
    return total


@workflow
async def naps() -> int:
    await asyncio.sleep(0.3)
    return await stage(7, 0)


@workflow
async def catches() -> str:
    try:
        await stage(9, 0)
    except StepFailedError:
        return "caught"
    return "fine"


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()
    broken.clear()


async def test_retry_of_a_run_that_failed_at_step_3_does_not_rerun_steps_1_and_2(
    world: World,
) -> None:
    broken.add(3)
    async with Worker(world, [five_stages, stage]):
        run = await start(five_stages, attributes={"job": Unique("j-1")}, world=world)
        with pytest.raises(RunFailedError):
            await run.result(timeout=20)
        assert ran == [1, 2, 3, 3]  # step 3 tried twice (max_retries=1)
        claims_before = await run.claims()
        assert [(c.key, c.value) for c in claims_before] == [("job", "j-1")]
        broken.clear()
        await run.retry(by="ops@test")
        assert await run.result(timeout=20) == 15
    assert ran == [1, 2, 3, 3, 3, 4, 5]
    events = await run.events()
    (reopened,) = [e for e in events if isinstance(e, RunReopened)]
    assert (reopened.by, reopened.steps) == ("ops@test", (3,))
    attempts = [e.attempt for e in events if isinstance(e, StepStarted) and e.step == 3]
    assert attempts == [1, 2, 3]
    assert await run.claims() == claims_before
    assert await run.status() is RunStatus.COMPLETED


async def test_a_retried_step_gets_a_fresh_retry_budget(world: World) -> None:
    broken.add(3)
    async with Worker(world, [five_stages, stage]):
        run = await start(five_stages, world=world)
        with pytest.raises(RunFailedError):
            await run.result(timeout=20)
        await run.retry()  # still broken: two more attempts, then it fails again
        with pytest.raises(RunFailedError):
            await run.result(timeout=20)
    assert ran == [1, 2, 3, 3, 3, 3]


async def test_retry_of_a_cancelled_run_requeues_its_timer(world: World) -> None:
    async with Worker(world, [naps, stage]):
        run = await start(naps, world=world)
        while await run.status() is not RunStatus.RUNNING:
            await asyncio.sleep(0.01)
        await run.cancel("oops", grace=None)
        assert await run.status() is RunStatus.CANCELLED
        await run.retry()
        assert await run.result(timeout=20) == 7


async def test_retry_refuses_a_run_that_is_not_failed_or_cancelled(world: World) -> None:
    async with Worker(world, [naps, catches, stage]):
        running = await start(naps, world=world)
        with pytest.raises(ValueError, match=r"pending|running"):
            await running.retry()
        broken.add(9)
        run = await start(catches, world=world)
        assert await run.result(timeout=20) == "caught"
        with pytest.raises(ValueError, match="completed"):
            await run.retry()
        with pytest.raises(RunNotFoundError):
            await get_run("no-such-run", world=world).retry()


async def test_fork_from_step_3_replays_steps_1_and_2_and_runs_the_rest(world: World) -> None:
    async with Worker(world, [five_stages, stage]):
        run = await start(five_stages, world=world)
        assert await run.result(timeout=20) == 15
        ran.clear()
        fork = await get_run(run.id, world=world).fork(from_step=3, by="ops@test")
        assert fork.id != run.id
        assert await fork.result(timeout=20) == 15
    assert ran == [3, 4, 5]
    events = await fork.events()
    (forked,) = [e for e in events if isinstance(e, RunForked)]
    assert (forked.source_run_id, forked.from_step, forked.by) == (run.id, 3, "ops@test")
    completed = [e.step for e in events if isinstance(e, StepCompleted)]
    assert completed == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="no step 9"):
        await run.fork(from_step=9)


# ---------------------------------------------------------------- slots and hooks again
# A reopened or forked run takes its slots (``Limited`` start pairs, the ``hold()`` block
# it was in) and its hook tokens again before its body goes on (issue 33, items 1 and 3).

inside: dict[str, int] = {}
peak: dict[str, int] = {}
order: list[str] = []


@pytest.fixture(autouse=True)
def _reset_lanes() -> None:
    inside.clear()
    peak.clear()
    order.clear()


@step(max_retries=0)
async def check(n: int) -> None:
    if n in broken:
        raise RuntimeError(f"run {n} is broken")


@step
async def enter(lane: str, n: int) -> None:
    inside[lane] = inside.get(lane, 0) + 1
    peak[lane] = max(peak.get(lane, 0), inside[lane])
    order.append(f"enter {n}")


@step
async def leave(lane: str, n: int) -> None:
    inside[lane] -= 1
    order.append(f"leave {n}")


async def _lane(lane: str, n: int, token: str | None) -> int:
    """Check, then be inside ``lane`` (until ``token``'s hook is resumed, if given)."""
    await check(n)
    await enter(lane, n)
    if token is not None:
        await create_hook(token).receive()
    await leave(lane, n)
    return n


@workflow
async def lane_job(lane: str, n: int, token: str | None) -> int:
    return await _lane(lane, n, token)


@workflow
async def held_lane_job(lane: str, n: int, token: str | None, limit: int) -> int:
    async with hold("desk", lane, limit=limit):
        return await _lane(lane, n, token)


@workflow
async def continued_lane_job(lane: str, n: int, rounds: int) -> int:
    if rounds:
        continue_as_new(lane, n, rounds - 1)
    return await _lane(lane, n, None)


@workflow
async def waits_for_hook(token: str) -> str:
    payload: str = await create_hook(token).receive()
    return f"got {payload}"


async def _until(check_: Callable[[], Awaitable[bool]]) -> None:
    with anyio.fail_after(30):
        while not await check_():
            await anyio.sleep(0.02)


async def _failed(run: Run[Any]) -> None:
    with pytest.raises(RunFailedError):
        await run.result(timeout=30)


async def _parked(world: World, holders: list[Run[Any]], tokens: list[str]) -> bool:
    """Whether each of ``holders`` waits on its hook of ``tokens`` (inside its lane)."""
    for run, token in zip(holders, tokens, strict=True):
        if not await _hooks_of(world, run.id, [token]):
            return False
    return True


def _lanes(world: World) -> Worker:
    return Worker(
        world, [lane_job, held_lane_job, continued_lane_job, waits_for_hook], concurrency=16
    )


async def _start_lane(block: str, lane: str, n: int, token: str | None, world: World) -> Run[int]:
    """A run in ``lane``: a ``Limited`` start pair, or a ``hold()`` block, of limit 1."""
    if block == "limited":
        return await start(
            lane_job, lane, n, token, attributes={"t": Limited(lane, 1)}, world=world
        )
    return await start(held_lane_job, lane, n, token, 1, world=world)


@pytest.mark.parametrize("again", ["retry", "fork"])
@pytest.mark.parametrize("block", ["limited", "hold"])
async def test_a_retried_or_forked_run_waits_for_the_slot_another_run_holds(
    world: World, block: str, again: str
) -> None:
    lane, token = f"{block}-{again}", f"{block}-{again}-token"
    key = "t" if block == "limited" else "desk"
    broken.add(1)
    async with _lanes(world):
        failed = await _start_lane(block, lane, 1, None, world)
        await _failed(failed)
        assert await world.list_slots(key, lane) == []  # closing let the slot go
        holder = await _start_lane(block, lane, 2, token, world)
        await _until(lambda: _parked(world, [holder], [token]))
        broken.clear()
        if again == "retry":
            await failed.retry()
            went_on = failed
        else:
            went_on = await failed.fork(from_step=1)
        assert await went_on.status() is RunStatus.PENDING  # in line, not running
        rows = await world.list_slots(key, lane)
        assert [(r.run_id, r.holding) for r in rows] == [(holder.id, True), (went_on.id, False)]
        await resume_hook(token, "go", world=world)
        assert await holder.result(timeout=30) == 2
        assert await went_on.result(timeout=30) == 1
    assert peak[lane] == 1
    assert order == ["enter 2", "leave 2", "enter 1", "leave 1"]
    assert await world.list_slots(key, lane) == []  # the re-run block released its slot


async def test_a_retried_successor_of_continue_as_new_takes_the_slot_again(
    world: World,
) -> None:
    broken.add(1)
    async with _lanes(world):
        first = await start(
            continued_lane_job, "c", 1, 1, attributes={"t": Limited("c", 1)}, world=world
        )
        await _until(lambda: _closed_successor(world))
        (successor,) = await list_runs(status=[RunStatus.FAILED], world=world)
        assert successor.id != first.id
        holder = await start(
            lane_job, "c", 2, "cont-h", attributes={"t": Limited("c", 1)}, world=world
        )
        await _until(lambda: _parked(world, [holder], ["cont-h"]))
        broken.clear()
        await successor.retry()
        assert await successor.status() is RunStatus.PENDING
        await resume_hook("cont-h", "go", world=world)
        assert await successor.result(timeout=30) == 1
    assert order == ["enter 2", "leave 2", "enter 1", "leave 1"]


async def _closed_successor(world: World) -> bool:
    return len(await list_runs(status=[RunStatus.FAILED], world=world)) == 1


async def test_retried_runs_never_exceed_the_limit_with_many_concurrent_runs(
    world: World,
) -> None:
    broken.update({1, 2, 3, 4})
    async with _lanes(world):
        limited = {"t": Limited("m", 2)}
        failed = [
            await start(lane_job, "m", n, None, attributes=limited, world=world)
            for n in (1, 2, 3, 4)
        ]
        for run in failed:
            await _failed(run)
        holders = [
            await start(lane_job, "m", n, f"many-{n}", attributes=limited, world=world)
            for n in (5, 6)
        ]
        await _until(lambda: _parked(world, holders, ["many-5", "many-6"]))
        broken.clear()
        for run in failed:
            await run.retry()
        assert [await run.status() for run in failed] == [RunStatus.PENDING] * 4
        newcomers = [
            await start(lane_job, "m", n, None, attributes=limited, world=world) for n in (7, 8)
        ]
        for n in (5, 6):
            await resume_hook(f"many-{n}", "go", world=world)
        with anyio.fail_after(60):
            done = [await run.result() for run in [*holders, *failed, *newcomers]]
    assert done == [5, 6, 1, 2, 3, 4, 7, 8]
    assert peak["m"] == 2  # both slots used, never a third holder
    assert await world.list_slots("t", "m") == []


async def test_a_run_cancelled_while_waiting_on_a_hook_holds_it_again_when_retried(
    world: World,
) -> None:
    async with _lanes(world):
        run = await start(waits_for_hook, "again-tok", world=world)
        await _until(lambda: _hooks_of(world, run.id, ["again-tok"]))
        await run.cancel("not now")
        with pytest.raises(RunCancelledError):
            await run.result(timeout=30)
        assert await list_hooks(run_id=run.id, world=world) == []
        await run.retry()
        assert await run.status() is RunStatus.RUNNING
        assert [h.token for h in await list_hooks(run_id=run.id, world=world)] == ["again-tok"]
        await resume_hook("again-tok", "late", world=world)
        assert await run.result(timeout=30) == "got late"


async def test_a_payload_for_a_run_waiting_for_its_slot_waits_with_it(world: World) -> None:
    """A retried run holds its hook at once, but a payload does not wake it past its
    place in line: it reads the payload once it holds its slot again."""
    async with _lanes(world):
        first = await start(held_lane_job, "w", 1, "w-first", 1, world=world)
        await _until(lambda: _parked(world, [first], ["w-first"]))
        await first.cancel("later")
        with pytest.raises(RunCancelledError):
            await first.result(timeout=30)
        holder = await start(held_lane_job, "w", 2, "w-holder", 1, world=world)
        await _until(lambda: _parked(world, [holder], ["w-holder"]))
        await first.retry()
        assert await first.status() is RunStatus.PENDING
        await resume_hook("w-first", "now", world=world)  # its hook is held again
        await anyio.sleep(0.5)  # room for a wrongly woken run to go on
        assert await first.status() is RunStatus.PENDING
        assert order == ["enter 1", "enter 2"]
        await resume_hook("w-holder", "go", world=world)
        assert await holder.result(timeout=30) == 2
        assert await first.result(timeout=30) == 1
    assert order == ["enter 1", "enter 2", "leave 2", "leave 1"]
    assert await world.list_slots("desk", "w") == []


async def test_retry_is_refused_when_another_run_took_the_hook_token(world: World) -> None:
    async with _lanes(world):
        run = await start(waits_for_hook, "taken-tok", world=world)
        await _until(lambda: _hooks_of(world, run.id, ["taken-tok"]))
        await run.cancel(grace=None)
        other = await start(waits_for_hook, "taken-tok", world=world)
        await _until(lambda: _hooks_of(world, other.id, ["taken-tok"]))
        with pytest.raises(ValueError, match=f"held by run {other.id}"):
            await run.retry()
        assert await run.status() is RunStatus.CANCELLED  # nothing changed
        await resume_hook("taken-tok", "x", world=world)
        assert await other.result(timeout=30) == "got x"


async def _hooks_of(world: World, run_id: str, tokens: list[str]) -> bool:
    return [h.token for h in await list_hooks(run_id=run_id, world=world)] == tokens
