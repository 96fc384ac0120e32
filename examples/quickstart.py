"""A checkout workflow on the embedded SQLite world: run it and watch what happens.

    python examples/quickstart.py

It starts three orders, one of them twice (the second start is refused by a
unique attribute), runs them with an in-process worker, and prints each run's
result and event log. The world lives in ``.workflow/world.db``; run the script
again and the earlier runs are still there.
"""

from __future__ import annotations

import asyncio
import time

import anyio

import worlds
from workflow import (
    AttributeConflictError,
    Unique,
    Worker,
    get_step_metadata,
    list_runs,
    set_attribute,
    start,
    step,
    workflow,
)
from worlds.types import AttributeSet, EventKind, StepCompleted, StepCreated, StepStarted


@step(max_retries=3, retry_delay=0.1)
async def reserve_stock(order_id: str, items: int) -> str:
    await anyio.sleep(0.01)  # stands for a call to the inventory service
    return f"rsv-{order_id}-{items}"


@step
async def charge_card(order_id: str, cents: int) -> str:
    # the step id is stable across retries: pass it to the payment provider
    return f"pay-{get_step_metadata().step_id}"


@step
def send_receipt(order_id: str, payment: str) -> None:
    """A plain def step: it runs in a worker thread."""


@workflow
async def checkout(order_id: str, items: int, cents: int) -> dict[str, str]:
    reservation, payment = await asyncio.gather(
        reserve_stock(order_id, items), charge_card(order_id, cents)
    )
    await set_attribute("stage", "paid")
    await send_receipt(order_id, payment)
    return {"reservation": reservation, "payment": payment}


def describe(event: EventKind) -> str:
    """One line per event: its kind and what it is about."""
    kind = type(event).__name__
    if isinstance(event, StepCreated):
        return f"{kind:<15} step {event.step} {event.name}"
    if isinstance(event, (StepStarted, StepCompleted)):
        return f"{kind:<15} step {event.step}, attempt {event.attempt}"
    if isinstance(event, AttributeSet):
        return f"{kind:<15} {event.key}={event.value!r}"
    return kind


async def main() -> None:
    world = worlds.open("sqlite:///.workflow/world.db")
    async with world, Worker(world, [checkout]):
        suffix = int(time.time())
        orders = [f"o-{suffix}-{n}" for n in range(3)]
        runs = []
        for order in orders:
            run = await start(
                checkout,
                order,
                2,
                1999,
                attributes={"customer": "c-9", "order": Unique(order)},
                world=world,
            )
            runs.append(run)
        try:  # the same order again: the unique attribute refuses it
            await start(
                checkout, orders[0], 2, 1999, attributes={"order": Unique(orders[0])}, world=world
            )
        except AttributeConflictError as exc:
            print(f"duplicate start refused: {exc}")
        for run in runs:
            print(f"\nrun {run.id} -> {await run.result(timeout=30)}")
            for event in await run.events():
                print(f"  {event.seq:>3} {describe(event)}")
        mine = await list_runs(attributes={"customer": "c-9"}, world=world)
        print(f"\nruns for customer c-9 in this world: {len(mine)} on this page")


if __name__ == "__main__":
    anyio.run(main)
