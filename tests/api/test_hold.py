"""``hold()``: durable semaphore blocks in workflow code, on every world."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from workflow import (
    Limited,
    NotInWorkflowError,
    Run,
    RunFailedError,
    RunStatus,
    Worker,
    create_hook,
    hold,
    list_hooks,
    replay,
    resume_hook,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import SlotAcquired, SlotReleased, SlotRequested

pytestmark = pytest.mark.anyio

running: dict[str, int] = {}
peaks: dict[str, int] = {}
order: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    running.clear()
    peaks.clear()
    order.clear()


@step
async def occupy(lane: str) -> str:
    running[lane] = running.get(lane, 0) + 1
    peaks[lane] = max(peaks.get(lane, 0), running[lane])
    try:
        # Wait (a while) for a partner inside the block: on a loaded machine two holders
        # may otherwise never overlap, and the peak would say nothing about the slots.
        deadline = anyio.current_time() + 5
        while running[lane] < 2 and anyio.current_time() < deadline:
            await anyio.sleep(0.01)
    finally:
        running[lane] -= 1
    return lane


@step
async def note(name: str) -> None:
    order.append(name)


@step(max_retries=0)
async def explode() -> None:
    raise RuntimeError("boom")


@workflow
async def gpu_job(lane: str, n: int) -> int:
    async with hold("gpu", lane, limit=2):
        await occupy(lane)
    return n


@workflow
async def gate_keeper(token: str) -> str:
    """Holds the pair ('gate', 'g') until its hook is resumed."""
    async with hold("gate", "g"):
        await note("keeper")
        await create_hook(token).receive()
    return "kept"


@workflow
async def gate_user(name: str) -> str:
    async with hold("gate", "g"):
        await note(name)
    return name


@workflow
async def failing_holder() -> None:
    async with hold("gate", "g"):
        await explode()


@workflow
async def plain_job(n: int) -> int:
    await note(f"plain-{n}")
    return n


@workflow
async def nested_same_pair() -> None:
    async with hold("gate", "g", limit=2), hold("gate", "g", limit=2):
        pass


async def _eventually(check: Callable[[], Awaitable[bool]], seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while not await check():
            await anyio.sleep(0.02)


async def _in_line(world: World, waiting: int) -> bool:
    rows = await world.list_slots("gate", "g")
    return sum(not row.holding for row in rows) == waiting


async def test_the_limit_holds_with_many_runs_and_all_complete(world: World) -> None:
    runs = [await start(gpu_job, "a100", n, world=world) for n in range(10)]
    others = [await start(gpu_job, "h100", n, world=world) for n in range(4)]
    async with Worker(world, [gpu_job], concurrency=16):
        with anyio.fail_after(60):
            assert [await run.result() for run in runs] == list(range(10))
            assert [await run.result() for run in others] == list(range(4))
    assert peaks["a100"] <= 2 and peaks["h100"] <= 2
    assert peaks["a100"] == 2  # the slots were used, not merely one at a time
    assert await world.list_slots("gpu", "a100") == []
    assert await world.list_slots("gpu", "h100") == []


async def test_waiters_enter_first_in_first_out_holding_no_worker(world: World) -> None:
    async with Worker(world, [gate_keeper, gate_user, plain_job], concurrency=1):
        keeper = await start(gate_keeper, "fifo-token", world=world)
        await _eventually(lambda: _holds(world, keeper))
        users = []
        for name in ["u1", "u2", "u3"]:
            users.append(await start(gate_user, name, world=world))
            await _eventually(functools.partial(_in_line, world, len(users)))
        # three runs wait, and the one-task worker still runs other work
        plain = await start(plain_job, 1, world=world)
        with anyio.fail_after(30):
            assert await plain.result() == 1
        assert all([await user.status() is RunStatus.RUNNING for user in users])
        rows = await world.list_slots("gate", "g")
        assert [row.run_id for row in rows] == [keeper.id, *(user.id for user in users)]
        assert [row.holding for row in rows] == [True, False, False, False]
        await resume_hook("fifo-token", "go", world=world)
        with anyio.fail_after(30):
            assert [await user.result() for user in users] == ["u1", "u2", "u3"]
            assert await keeper.result() == "kept"
    assert order == ["keeper", "plain-1", "u1", "u2", "u3"]
    assert await world.list_slots("gate", "g") == []


async def _holds(world: World, run: Run[Any]) -> bool:
    return [(row.run_id, row.holding) for row in await world.run_slots(run.id)] == [(run.id, True)]


async def test_a_failing_block_releases_its_slot(world: World) -> None:
    async with Worker(world, [failing_holder, gate_user]):
        failing = await start(failing_holder, world=world)
        await _eventually(lambda: _closed(failing))
        assert await failing.status() is RunStatus.FAILED
        kinds = [type(event) for event in await failing.events()]
        assert kinds.index(SlotRequested) < kinds.index(SlotReleased)
        assert await world.list_slots("gate", "g") == []
        user = await start(gate_user, "after", world=world)
        with anyio.fail_after(30):
            assert await user.result() == "after"


async def _closed(run: Run[Any]) -> bool:
    return (await run.status()).is_closed


async def test_cancelling_a_waiter_gives_up_its_place(world: World) -> None:
    async with Worker(world, [gate_keeper, gate_user]):
        keeper = await start(gate_keeper, "cancel-token", world=world)
        await _eventually(lambda: _holds(world, keeper))
        first = await start(gate_user, "first", world=world)
        await _eventually(lambda: _in_line(world, 1))
        second = await start(gate_user, "second", world=world)
        await _eventually(lambda: _in_line(world, 2))
        await first.cancel("not needed")
        with anyio.fail_after(30):
            while await first.status() is not RunStatus.CANCELLED:
                await anyio.sleep(0.02)
        rows = await world.list_slots("gate", "g")
        assert [(row.run_id, row.holding) for row in rows] == [
            (keeper.id, True),
            (second.id, False),
        ]
        await resume_hook("cancel-token", "go", world=world)
        with anyio.fail_after(30):
            assert await second.result() == "second"
    assert "first" not in order
    assert await world.list_slots("gate", "g") == []


async def test_cancelling_a_holder_releases_its_slot(world: World) -> None:
    async with Worker(world, [gate_keeper, gate_user]):
        keeper = await start(gate_keeper, "holder-token", world=world)
        await _eventually(lambda: _holds(world, keeper))
        user = await start(gate_user, "next", world=world)
        await _eventually(lambda: _in_line(world, 1))
        await keeper.cancel("stop")
        with anyio.fail_after(30):
            assert await user.result() == "next"
    assert await keeper.status() is RunStatus.CANCELLED


async def test_a_waiting_run_replays_deterministically(world: World) -> None:
    async with Worker(world, [gate_keeper, gate_user]):
        keeper = await start(gate_keeper, "replay-token", world=world)
        await _eventually(lambda: _holds(world, keeper))
        user = await start(gate_user, "replayed", world=world)
        await _eventually(lambda: _in_line(world, 1))
        await _eventually(lambda: _has_hook(world, "replay-token"))
        await resume_hook("replay-token", "go", world=world)
        with anyio.fail_after(30):
            assert await user.result() == "replayed"
    events = await user.events()
    requested = [e for e in events if isinstance(e, SlotRequested)]
    assert [(e.key, e.value, e.limit, e.acquired) for e in requested] == [("gate", "g", 1, False)]
    assert [e.hold for e in events if isinstance(e, SlotAcquired)] == [1]
    await replay(gate_user, events, run_id=user.id)
    await replay(gate_keeper, await keeper.events(), run_id=keeper.id)


async def test_bad_holds_are_refused(world: World) -> None:
    with pytest.raises(NotInWorkflowError):
        hold("gate", "g")
    with pytest.raises(ValueError):
        hold("gate", "g", limit=0)
    with pytest.raises(TypeError):
        hold("gate", "g", limit=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        hold("", "g")
    async with Worker(world, [nested_same_pair]):
        run = await start(nested_same_pair, world=world)
        with anyio.fail_after(30):
            while not (await run.status()).is_closed:
                await anyio.sleep(0.02)
    assert await run.status() is RunStatus.FAILED
    assert await world.list_slots("gate", "g") == []


@workflow
async def wide_gate_user(name: str) -> str:
    async with hold("gate", "g", limit=2):
        await note(name)
    return name


async def test_a_pair_has_one_limit_and_another_is_refused(world: World) -> None:
    """The pair's limit is fixed by the runs holding it (issue 33, item 2)."""
    async with Worker(world, [gate_keeper, gate_user, wide_gate_user]):
        keeper = await start(gate_keeper, "one-limit-token", world=world)
        await _eventually(lambda: _holds(world, keeper))
        wide = await start(wide_gate_user, "wide", world=world)
        with pytest.raises(RunFailedError, match=r"gate='g' is limited to 1 .* but 2 was asked"):
            await wide.result(timeout=30)
        rows = await world.list_slots("gate", "g")
        assert [(row.run_id, row.holding) for row in rows] == [(keeper.id, True)]
        await _eventually(lambda: _has_hook(world, "one-limit-token"))  # the keeper waits on it
        await resume_hook("one-limit-token", "go", world=world)
        with anyio.fail_after(30):
            assert await keeper.result() == "kept"
        again = await start(wide_gate_user, "wide-again", world=world)  # empty pair: any limit
        with anyio.fail_after(30):
            assert await again.result() == "wide-again"
    assert "wide" not in order and "wide-again" in order
    requested = [e for e in await wide.events() if isinstance(e, SlotRequested)]
    assert [(e.limit, e.refused) for e in requested] == [(2, 1)]
    await replay(wide_gate_user, await wide.events(), run_id=wide.id)
    assert await world.list_slots("gate", "g") == []


@workflow
async def waits_for(token: str) -> str:
    await create_hook(token).receive()
    return token


async def test_a_hold_meets_a_limited_start_of_the_pair_with_its_limit(world: World) -> None:
    async with Worker(world, [wide_gate_user, waits_for]):
        holder = await start(
            waits_for, "limited-start-token", attributes={"gate": Limited("g", 1)}, world=world
        )
        wide = await start(wide_gate_user, "wide", world=world)
        with pytest.raises(RunFailedError, match="limited to 1"):
            await wide.result(timeout=30)
        await _eventually(lambda: _has_hook(world, "limited-start-token"))
        await resume_hook("limited-start-token", "go", world=world)
        with anyio.fail_after(30):
            assert await holder.result() == "limited-start-token"
    assert "wide" not in order
    assert await world.list_slots("gate", "g") == []


async def _has_hook(world: World, token: str) -> bool:
    return token in [h.token for h in await list_hooks(world=world)]
