"""``Run.retry`` reopens a failed or cancelled run; ``Run.fork`` replays it up to a step."""

from __future__ import annotations

import asyncio

import pytest

from workflow import (
    RunFailedError,
    RunNotFoundError,
    RunStatus,
    StepFailedError,
    Unique,
    Worker,
    get_run,
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
