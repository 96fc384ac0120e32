"""Order fulfilment where the newest plan wins, and a superseded plan is fenced.

    python examples/order_fulfilment.py

A customer changes the shipping address while the first fulfilment plan is
still running. ``start_or_cancel_run`` starts the new plan and cancels the old
one in one atomic world operation, so there is exactly one authoritative plan.
The warehouse is an external system: it remembers the highest claim generation
it has seen per order (a fencing token) and refuses anything older, so even a
step of the old plan that was already in flight cannot make it ship twice.
"""

from __future__ import annotations

import anyio

import worlds
from workflow import RunCancelledError, Worker, get_run, get_step_metadata, step, workflow
from workflow.policies import start_or_cancel_run


class Warehouse:
    """Stands for a warehouse system that accepts fencing tokens."""

    def __init__(self) -> None:
        self.highest: dict[str, int] = {}
        self.shipments: list[tuple[str, str, int]] = []
        self.refused: list[tuple[str, str, int]] = []

    def ship(self, order_id: str, address: str, generation: int) -> bool:
        if generation < self.highest.get(order_id, 0):
            self.refused.append((order_id, address, generation))
            return False
        self.highest[order_id] = generation
        self.shipments.append((order_id, address, generation))
        return True


warehouse = Warehouse()


@step
async def reserve_inventory(order_id: str) -> str:
    return f"reservation-{order_id}"


@step
async def buy_label(order_id: str, address: str) -> str:
    await anyio.sleep(0.3)  # a slow carrier API: the re-plan arrives meanwhile
    return f"label-{order_id}-{address}"


@step
async def notify_warehouse(order_id: str, address: str) -> bool:
    meta = get_step_metadata()
    claim = await get_run(meta.run_id).claim("order")
    if claim is None:  # this plan lost its claim: never act on it
        return False
    return warehouse.ship(order_id, address, claim.generation)


@workflow
async def fulfil(order_id: str, address: str) -> str:
    await reserve_inventory(order_id)
    label = await buy_label(order_id, address)
    shipped = await notify_warehouse(order_id, address)
    return f"{label} shipped={shipped}"


async def main() -> None:
    world = worlds.open("memory://")
    async with world, Worker(world, [fulfil]):
        first = await start_or_cancel_run(
            fulfil, "o-123", "Old Street 1", key="order", value="o-123", world=world
        )
        await anyio.sleep(0.1)  # the first plan is buying its label
        second = await start_or_cancel_run(
            fulfil, "o-123", "New Road 9", key="order", value="o-123", world=world
        )
        try:
            await first.result(timeout=5)
        except RunCancelledError as exc:
            print(f"first plan: {exc}")
        print(f"second plan: {await second.result(timeout=5)}")
        claim = await second.claim("order")
        assert claim is not None
        print(f"authoritative plan holds order=o-123 at generation {claim.generation}")
    print(f"warehouse shipments: {warehouse.shipments}")
    assert [address for _, address, _ in warehouse.shipments] == ["New Road 9"]


if __name__ == "__main__":
    anyio.run(main)
