"""Replay of ``hold()`` blocks: acquire and release come from the log, never from a world."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import worlds
from tests.api.test_hold import gate_keeper, gate_user, note
from workflow import (
    NonDeterminismError,
    Worker,
    encode_history,
    hold,
    replay,
    resume_hook,
    start,
    workflow,
)
from worlds.types import EventKind, SlotAcquired, SlotReleased, SlotRequested

pytestmark = pytest.mark.anyio


@workflow(name="gate_user")
async def other_pair(name: str) -> str:
    async with hold("gate", "elsewhere"):
        await note(name)
    return name


@workflow(name="gate_user")
async def without_hold(name: str) -> str:
    await note(name)
    return name


@workflow(name="gate_user")
async def higher_limit(name: str) -> str:
    async with hold("gate", "g", limit=5):
        await note(name)
    return name


async def _recorded(waited: bool) -> tuple[str, list[EventKind]]:
    """A closed ``gate_user`` run: it waited in line for the slot, or took it at once."""
    async with worlds.open("memory://") as world, Worker(world, [gate_keeper, gate_user]):
        if waited:
            keeper = await start(gate_keeper, "replay-engine", world=world)
            with anyio.fail_after(30):
                while not await world.run_slots(keeper.id):
                    await anyio.sleep(0.01)
        user = await start(gate_user, "u", world=world)
        if waited:
            with anyio.fail_after(30):
                while len(await world.list_slots("gate", "g")) < 2:
                    await anyio.sleep(0.01)
            await resume_hook("replay-engine", "go", world=world)
        with anyio.fail_after(30):
            assert await user.result() == "u"
        return user.id, await user.events()


@pytest.mark.parametrize("waited", [True, False], ids=["waited", "at-once"])
async def test_a_recorded_hold_replays_cleanly(waited: bool) -> None:
    run_id, events = await _recorded(waited)
    (requested,) = [e for e in events if isinstance(e, SlotRequested)]
    assert requested.acquired is not waited
    assert len([e for e in events if isinstance(e, SlotAcquired)]) == int(waited)
    assert [e.hold for e in events if isinstance(e, SlotReleased)] == [1]
    await replay(gate_user, events, run_id=run_id)
    await replay(gate_user, encode_history(events), run_id=run_id)


@pytest.mark.parametrize("changed", [other_pair, without_hold], ids=["other-pair", "no-hold"])
async def test_changing_the_hold_is_caught(changed: Any) -> None:
    run_id, events = await _recorded(True)
    with pytest.raises(NonDeterminismError) as info:
        await replay(changed, events, run_id=run_id)
    assert info.value.position == 0  # the first call: the hold
    assert "the log recorded hold('gate', 'g')" in str(info.value)


async def test_the_limit_is_the_worlds_business_on_replay() -> None:
    """A changed limit replays the recorded answer (the world decided it once)."""
    run_id, events = await _recorded(True)
    await replay(higher_limit, events, run_id=run_id)


async def test_a_run_still_waiting_replays_to_the_wait() -> None:
    """Cut after ``SlotRequested(acquired=False)``: the body waits there and issues nothing."""
    run_id, events = await _recorded(True)
    cut = next(i for i, e in enumerate(events) if isinstance(e, SlotRequested)) + 1
    await replay(gate_user, events[:cut], run_id=run_id)
    assert not any(isinstance(e, SlotAcquired) for e in events[:cut])
