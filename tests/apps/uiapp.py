"""Workflows the web UI's tests and screenshot script show: retries, timers, hooks, chains."""

from __future__ import annotations

from workflow import (
    FatalError,
    RetryableError,
    continue_as_new,
    create_hook,
    get_step_metadata,
    set_attribute,
    sleep,
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


WORKFLOWS = [checkout, approval, countdown, refund]
