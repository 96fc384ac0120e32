"""``patched`` with runs in flight: a deploy keeps old runs on the old branch."""

from __future__ import annotations

import anyio
import pytest

from workflow import (
    NotInWorkflowError,
    Worker,
    create_hook,
    patched,
    replay,
    resume_hook,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.types import PatchMarker

pytestmark = pytest.mark.anyio


@step
async def price(order: str) -> int:
    return 100


@step
async def discount_v1(total: int) -> int:
    return total - 5


@step
async def discount_v2(total: int) -> int:
    return total * 9 // 10


@workflow(name="checkout")
async def checkout_v1(order: str) -> int:
    total = await discount_v1(await price(order))
    await create_hook(f"confirm-{order}")
    return total


@workflow(name="checkout")
async def checkout_v2(order: str) -> int:
    total = await price(order)
    if patched("discount-v2"):
        total = await discount_v2(total)
    else:
        total = await discount_v1(total)
    await create_hook(f"confirm-{order}")
    return total


async def _hook_waits(world: World, token: str) -> None:
    with anyio.fail_after(10):
        while not any(h.token == token for h in await world.list_hooks()):
            await anyio.sleep(0.02)


async def test_a_run_in_flight_keeps_the_old_branch_and_a_new_run_takes_the_new(
    world: World,
) -> None:
    async with Worker(world, [checkout_v1, price, discount_v1]):
        old = await start(checkout_v1, "o-1", world=world)
        await _hook_waits(world, "confirm-o-1")  # past the changed code, waiting
    # deploy: a worker with v2 carries on the open run and runs new ones
    async with Worker(world, [checkout_v2, price, discount_v1, discount_v2]):
        new = await start(checkout_v2, "o-2", world=world)
        await _hook_waits(world, "confirm-o-2")
        await resume_hook("confirm-o-1", True, world=world)
        await resume_hook("confirm-o-2", True, world=world)
        assert await old.result(timeout=10) == 95
        assert await new.result(timeout=10) == 90
    markers = [e for e in await new.events() if isinstance(e, PatchMarker)]
    assert [m.name for m in markers] == ["discount-v2"]
    assert not any(isinstance(e, PatchMarker) for e in await old.events())
    # both logs replay under v2 (the recorded history of the old run included)
    await replay(checkout_v2, await old.events(), run_id=old.id)
    await replay(checkout_v2, await new.events(), run_id=new.id)


async def test_patched_outside_a_workflow_is_refused() -> None:
    with pytest.raises(NotInWorkflowError):
        patched("x")
    with pytest.raises(ValueError):
        patched("")
