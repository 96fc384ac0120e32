"""Workflows the web UI's tests and screenshot script show: retries, timers, hooks, chains."""

from __future__ import annotations

import asyncio

from workflow import (
    FatalError,
    RetryableError,
    continue_as_new,
    create_hook,
    get_step_metadata,
    hold,
    set_attribute,
    sleep,
    start,
    step,
    workflow,
)


@step(max_retries=3)
async def charge(customer: str, cents: int) -> str:
    if get_step_metadata().attempt == 1:
        raise RetryableError("card network timed out", retry_after=0.05)
    return f"pay-{customer}-{cents}"


@step
async def ship(customer: str) -> str:
    return f"ship-{customer}"


@workflow
async def checkout(customer: str, cents: int) -> dict[str, str]:
    payment = await charge(customer, cents)
    await sleep(0.05)
    await set_attribute("stage", "paid")
    return {"payment": payment, "shipment": await ship(customer)}


@step
async def refund_card(customer: str) -> str:
    raise FatalError(f"payment provider refused the refund for {customer}: card expired")


@workflow
async def refund(customer: str) -> str:
    await set_attribute("stage", "refunding")
    return await refund_card(customer)


@workflow
async def approval(order: str) -> object:
    await set_attribute("order", order, unique=True)
    decision = await create_hook(f"approve-{order}")
    await set_attribute("stage", "decided")
    return decision


@workflow
async def countdown(n: int) -> int:
    await set_attribute("left", n)
    if n > 0:
        continue_as_new(n - 1)
    return n


@step
async def unit(n: int) -> int:
    return n


@workflow
async def fanout(n: int) -> int:
    """``n`` steps, in batches of 50: a waterfall with many rows."""
    total = 0
    for first in range(0, n, 50):
        total += sum(await asyncio.gather(*(unit(i) for i in range(first, min(n, first + 50)))))
    return total


@workflow
async def pipeline(order: str) -> object:
    """Every kind of bar: a retried step, a timer, a hold, a child run, then a hook."""
    await charge(order, 1)
    await sleep(0.05)
    async with hold("warehouse", "w-1", limit=1):
        await ship(order)
    child = await start(countdown, 0)
    await child.result()
    return await create_hook(f"pipeline-{order}")


WORKFLOWS = [checkout, approval, countdown, refund, fanout, pipeline]
