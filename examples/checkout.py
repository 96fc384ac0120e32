"""The README's example workflow: charge an order, mark it paid, wait an hour, send a receipt.

    python examples/checkout.py

``examples/test_checkout.py`` tests it with ``workflow.testing`` (the hour is skipped).
"""

from __future__ import annotations

import asyncio

import worlds
from workflow import Unique, Worker, get_step_metadata, set_attribute, start, step, workflow

receipts: list[str] = []
"""Orders a receipt was sent for (a stand-in for the mail service)."""


@step(max_retries=3)
async def charge(order_id: str, cents: int) -> str:
    # stands for the payment provider; the step id is a stable idempotency key for it
    return f"pay-{get_step_metadata().step_id}"


@step
def send_receipt(order_id: str) -> None:  # a plain def step runs in a thread
    receipts.append(order_id)


@workflow
async def checkout(order_id: str, cents: int) -> str:
    payment = await charge(order_id, cents)
    await set_attribute("stage", "paid")
    await asyncio.sleep(3600)  # a durable timer: no worker is held meanwhile
    await send_receipt(order_id)
    return payment


async def main() -> None:
    world = worlds.open("memory://")  # or sqlite:///app.db, postgresql://...
    async with world, Worker(world, [checkout]):
        run = await start(
            checkout,
            "o-1",
            1999,
            world=world,
            attributes={"customer": "c-9", "order": Unique("o-1")},
        )
        print(run.id, await run.status())  # the run then sleeps an hour before its receipt


if __name__ == "__main__":
    asyncio.run(main())
