"""``patched``: histories recorded before a patch replay cleanly under the patched code."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.apps.orders import charge, reserve, ship
from tests.engine.test_replay_histories import HISTORIES, load
from workflow import (
    AttributeConflictError,
    NonDeterminismError,
    Worker,
    create_hook,
    now,
    patched,
    random,
    replay,
    set_attribute,
    start,
    step,
    workflow,
)
from worlds.memory import MemoryWorld
from worlds.types import PatchMarker

pytestmark = pytest.mark.anyio


@step
async def ship_insured(order: str, carrier: str) -> str:
    return f"insured-{order}-{carrier}"


async def _body(order: str, items: int, cents: int, insured: bool | None) -> dict[str, Any]:
    """``tests.apps.orders.fulfil`` with its shipping changed three ways:
    insured None: the change guarded by ``patched``; True: unguarded; False: as recorded."""
    try:
        await set_attribute("order", order, unique=True)
    except AttributeConflictError as exc:
        return {"duplicate_of": exc.existing_run_id}
    reservation, payment = await asyncio.gather(reserve(order, items), charge(order, cents))
    await set_attribute("stage", "paid")
    carrier = "fast" if random() < 0.5 else "cheap"
    approval = create_hook(f"approve-{order}")
    try:
        decision = await asyncio.wait_for(approval.receive(), timeout=0.2)
    except TimeoutError:
        decision = "auto"
    if insured is None:
        insured = patched("insured-shipping")
    if insured:
        shipment = await ship_insured(order, carrier)
    else:
        shipment = await ship(order, carrier)
    return {
        "reservation": reservation,
        "payment": payment,
        "shipment": shipment,
        "decision": str(decision),
        "at": now().isoformat(),
    }


@workflow(name="fulfil")
async def fulfil_patched(order: str, items: int, cents: int) -> dict[str, Any]:
    return await _body(order, items, cents, None)


@workflow(name="fulfil")
async def fulfil_unguarded(order: str, items: int, cents: int) -> dict[str, Any]:
    return await _body(order, items, cents, True)


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_a_history_recorded_before_a_patch_replays_under_it(path: Any) -> None:
    run_id, history = load(path)
    await replay(fulfil_patched, history, run_id=run_id)


async def test_the_same_change_without_patched_is_caught() -> None:
    shipped = [path for path in HISTORIES if "duplicate" not in path.stem]
    assert shipped
    for path in shipped:
        run_id, history = load(path)
        with pytest.raises(NonDeterminismError):
            await replay(fulfil_unguarded, history, run_id=run_id)


async def test_a_new_run_records_the_marker_once_and_replays_under_both_versions() -> None:
    async with MemoryWorld() as world:
        async with Worker(world, [fulfil_patched, reserve, charge, ship_insured]):
            run = await start(fulfil_patched, "o-77", 2, 300, world=world)
            result = await run.result(timeout=20)
        assert result["shipment"].startswith("insured-o-77-")
        events = await run.events()
        assert [e.name for e in events if isinstance(e, PatchMarker)] == ["insured-shipping"]
        await replay(fulfil_patched, events, run_id=run.id)
        # once no run needs the old branch, the patched() call goes too
        await replay(fulfil_unguarded, events, run_id=run.id)
