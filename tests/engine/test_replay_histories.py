"""Replay recorded event logs (tests/histories) against today's workflow code.

The histories were recorded from real runs of ``tests.apps.orders.fulfil``
with ``encode_history``. If a change to the workflow makes different calls,
these tests fail before any running workflow would.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.apps.orders import charge, fulfil, reserve, ship
from workflow import NonDeterminismError, decode_history, replay, set_attribute, workflow

pytestmark = pytest.mark.anyio

HISTORIES = sorted((Path(__file__).resolve().parents[1] / "histories").glob("*.json"))


def load(path: Path) -> tuple[str, list[Any]]:
    document = json.loads(path.read_text())
    return document["run_id"], decode_history(json.dumps(document["events"]))


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_recorded_runs_replay_cleanly(path: Path) -> None:
    run_id, history = load(path)
    await replay(fulfil, history, run_id=run_id)


@workflow(name="fulfil")
async def fulfil_reordered(order: str, items: int, cents: int) -> dict[str, str]:
    await set_attribute("order", order, unique=True)
    payment, reservation = await asyncio.gather(charge(order, cents), reserve(order, items))
    return {"payment": payment, "reservation": reservation}


@workflow(name="fulfil")
async def fulfil_without_shipping(order: str, items: int, cents: int) -> str:
    await fulfil(order, items, cents)  # calls the same steps ...
    return "done"


@workflow(name="fulfil")
async def fulfil_with_extra_step(order: str, items: int, cents: int) -> dict[str, str]:
    result = await fulfil(order, items, cents)
    await ship(order, "again")  # ... plus one the recorded runs never made
    return result


async def test_reordered_calls_are_caught() -> None:
    run_id, history = load(HISTORIES[0])
    with pytest.raises(NonDeterminismError) as info:
        await replay(fulfil_reordered, history, run_id=run_id)
    assert info.value.position == 1
    assert "reserve" in info.value.recorded and "charge" in info.value.issued


async def test_an_extra_call_after_the_end_is_caught() -> None:
    run_id, history = load(next(p for p in HISTORIES if "approved" in p.name))
    await replay(fulfil_without_shipping, history, run_id=run_id)
    with pytest.raises(NonDeterminismError, match="recorded the end of the workflow"):
        await replay(fulfil_with_extra_step, history, run_id=run_id)


async def test_histories_of_another_workflow_are_refused() -> None:
    run_id, history = load(HISTORIES[0])

    @workflow(name="other")
    async def other() -> None:
        return None

    with pytest.raises(ValueError, match="fulfil"):
        await replay(other, history, run_id=run_id)
