"""A workflow whose recorded histories live in tests/histories (replay tests).

Change it only together with its histories: the replay test proves that the
code still makes the calls its recorded runs made.
"""

from __future__ import annotations

import asyncio

from workflow import (
    AttributeConflictError,
    create_hook,
    now,
    random,
    set_attribute,
    step,
    workflow,
)


@step
async def reserve(order: str, items: int) -> str:
    return f"rsv-{order}-{items}"


@step
async def charge(order: str, cents: int) -> str:
    return f"pay-{order}-{cents}"


@step
async def ship(order: str, carrier: str) -> str:
    return f"ship-{order}-{carrier}"


@workflow
async def fulfil(order: str, items: int, cents: int) -> dict[str, str]:
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
    shipment = await ship(order, carrier)
    return {
        "reservation": reservation,
        "payment": payment,
        "shipment": shipment,
        "decision": str(decision),
        "at": now().isoformat(),
    }
