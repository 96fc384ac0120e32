"""A cart workflow fed by ``start_or_resume_hook``; run as a module, a client process.

``python -m tests.apps.cartapp URL CART FIRST COUNT`` sends items FIRST..FIRST+COUNT-1
to the cart, each with its own resume id, each sent twice (a retried request).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio

import worlds
from workflow import create_hook, workflow
from workflow.policies import start_or_resume_hook


@workflow
async def cart(cart_id: str, expected: int) -> list[Any]:
    items = []
    async for item in create_hook(f"cart-{cart_id}:items"):
        items.append(item)
        if len(items) == expected:
            return items
    return items


async def send(url: str, cart_id: str, first: int, count: int, expected: int) -> None:
    async with worlds.open(url) as world:
        for n in range(first, first + count):
            for _ in range(2):
                await start_or_resume_hook(
                    cart,
                    cart_id,
                    expected,
                    key="cart",
                    value=cart_id,
                    token=f"cart-{cart_id}:items",
                    payload={"sku": n},
                    resume_id=f"req-{n}",
                    world=world,
                )


if __name__ == "__main__":
    url, cart_id, first, count, expected = sys.argv[1:6]
    anyio.run(send, url, cart_id, int(first), int(count), int(expected))
