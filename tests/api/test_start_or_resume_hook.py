"""``start_or_resume_hook``: signal-with-start keyed by a unique attribute pair."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from workflow import (
    HookConflictError,
    RunStatus,
    Worker,
    create_hook,
    list_runs,
    start,
    step,
    workflow,
)
from workflow.policies import start_or_resume_hook
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@step
async def prepare(cart_id: str) -> str:
    return f"prepared {cart_id}"


@workflow
async def cart(cart_id: str) -> list[Any]:
    # the hook is created only after a step: payloads sent before then wait for it
    await prepare(cart_id)
    items: list[Any] = []
    async for item in create_hook(f"cart-{cart_id}:items"):
        if item == "checkout":
            return items
        items.append(item)
    return items


@workflow
async def squatter(token: str) -> None:
    await create_hook(token)


async def test_the_first_call_starts_the_run_and_later_ones_resume_it(world: World) -> None:
    sent = []
    for n, item in enumerate(["apple", "pear", "apple", "checkout"]):
        run = await start_or_resume_hook(
            cart,
            "c-1",
            key="cart",
            value="c-1",
            token="cart-c-1:items",
            payload=item,
            resume_id=f"req-{n}",
            world=world,
        )
        sent.append(run.id)
    # a retried request with a resume id already used delivers nothing more
    again = await start_or_resume_hook(
        cart, "c-1", key="cart", value="c-1", token="cart-c-1:items", payload="plum",
        resume_id="req-1", world=world,
    )  # fmt: skip
    assert len(set(sent)) == 1 and again.id == sent[0]
    async with Worker(world, [cart, prepare]):
        assert await again.result(timeout=20) == ["apple", "pear", "apple"]
        # the holder closed: the next call starts a new run that takes the pair over
        fresh = await start_or_resume_hook(
            cart, "c-1", key="cart", value="c-1", token="cart-c-1:items", payload="checkout",
            world=world,
        )  # fmt: skip
        assert fresh.id != again.id
        assert await fresh.result(timeout=20) == []
    assert (await fresh.attributes())["cart"] == "c-1"


async def test_a_token_held_by_an_unrelated_run_is_refused(world: World) -> None:
    async with Worker(world, [squatter]):
        other = await start(squatter, "cart-c-2:items", world=world)
        with anyio.fail_after(10):
            while not await world.list_hooks(other.id):
                await anyio.sleep(0.02)
        with pytest.raises(HookConflictError) as caught:
            await start_or_resume_hook(
                cart, "c-2", key="cart", value="c-2", token="cart-c-2:items", world=world
            )
        assert caught.value.existing_run.id == other.id
        assert await other.status() is RunStatus.RUNNING


async def test_bad_arguments_write_nothing(world: World) -> None:
    with pytest.raises(ValueError):
        await start_or_resume_hook(cart, "c", key="$bad", value="c", token="t", world=world)
    with pytest.raises(TypeError):
        await start_or_resume_hook(cart, "c", key="cart", value="c", token="t", payload=object(),
                                   world=world)  # fmt: skip
    assert len(await list_runs(world=world)) == 0
