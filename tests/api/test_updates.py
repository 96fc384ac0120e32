"""Updates: ``receive_updates`` in workflow code, ``Run.update`` and
``update_with_start`` from outside, on every world."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    NotInWorkflowError,
    RunStatus,
    Unique,
    UpdateFailedError,
    UpdateRejectedError,
    Worker,
    get_run,
    list_runs,
    receive_updates,
    start,
    step,
    workflow,
)
from workflow.policies import update_with_start
from worlds.protocol import World
from worlds.types import UpdateReceived, UpdateRejected, UpdateReplied

pytestmark = pytest.mark.anyio


@step
async def price(item: str) -> int:
    return len(item)


@workflow
async def cart(customer: str) -> dict[str, Any]:
    items: list[str] = []
    total = 0
    async for update in receive_updates("cart"):
        action, item = update.payload
        if action == "checkout":
            await update.reply({"items": items, "total": total})
            return {"customer": customer, "items": items, "total": total}
        if action != "add" or not item:
            await update.reject(f"cannot {action} {item!r}")
            continue
        total += await price(item)  # a step between the update and its reply
        items.append(item)
        await update.reply(len(items))
    return {}


@workflow
async def ignores_updates(n: int) -> int:
    await price("x")
    return n


@workflow
async def closes_first() -> str:
    updates = receive_updates("ask")
    await anext(updates)
    return "closed without replying"


@workflow
async def answers_twice() -> str:
    update = await anext(receive_updates("ask"))
    await update.reply("first")
    try:
        await update.reply("second")
    except RuntimeError as exc:
        return str(exc)
    return "answered twice"


async def test_replies_rejections_and_the_recorded_log(world: World) -> None:
    async with Worker(world, [cart, price]):
        run = await start(cart, "c-1", world=world)
        assert await run.update("cart", ["add", "apple"]) == 1
        assert await run.update("cart", ["add", "pear"], update_id="req-2") == 2
        assert await run.update("cart", ["add", "other"], update_id="req-2") == 2  # a retry
        with pytest.raises(UpdateRejectedError) as rejected:
            await run.update("cart", ["remove", "apple"], update_id="req-3")
        assert rejected.value.message == "cannot remove 'apple'"
        with pytest.raises(UpdateRejectedError):  # the same recorded rejection
            await run.update("cart", ["add", "plum"], update_id="req-3")
        done = await run.update("cart", ["checkout", None], update_id="req-4")
        assert done == {"items": ["apple", "pear"], "total": 9}
        assert (await run.result(timeout=20))["items"] == ["apple", "pear"]
    # the run is closed and no worker runs: recorded answers are still given
    assert await run.update("cart", ["add", "x"], update_id="req-2") == 2
    assert await run.update("cart", None, update_id="req-4") == done
    with pytest.raises(UpdateFailedError) as failed:
        await run.update("cart", ["add", "late"])
    assert "completed" in failed.value.reason
    events = await run.events()
    assert [e.update_id for e in events if isinstance(e, UpdateReceived)][1:] == [
        "req-2",
        "req-3",
        "req-4",
    ]
    assert [e.update_id for e in events if isinstance(e, UpdateRejected)] == ["req-3"]
    assert len([e for e in events if isinstance(e, UpdateReplied)]) == 3


async def test_a_rebuilt_instance_replays_the_answers(world: World) -> None:
    async with Worker(world, [cart, price]):
        run = await start(cart, "c-2", world=world)
        assert await run.update("cart", ["add", "fig"], update_id="a") == 1
    # a fresh worker has no cached instance: it replays the log, answers included
    async with Worker(world, [cart, price]):
        assert await run.update("cart", ["add", "kiwi"], update_id="b") == 2
        assert await run.update("cart", ["add", "fig"], update_id="a") == 1
        assert (await run.update("cart", ["checkout", None]))["total"] == 7
        assert await run.status() is RunStatus.COMPLETED


async def test_concurrent_callers_get_one_reply_per_update_id(world: World) -> None:
    async with Worker(world, [cart, price]):
        run = await start(cart, "c-3", world=world)
        replies: dict[str, set[int]] = {}

        async def call(n: int) -> None:
            update_id = f"u-{n % 5}"
            reply = await run.update("cart", ["add", f"item-{n % 5}"], update_id=update_id)
            replies.setdefault(update_id, set()).add(reply)

        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(call, n)
        assert all(len(found) == 1 for found in replies.values())
        assert sorted(found.pop() for found in replies.values()) == [1, 2, 3, 4, 5]
        result = await run.update("cart", ["checkout", None])
        assert sorted(result["items"]) == [f"item-{n}" for n in range(5)]


async def test_updates_fail_when_the_run_closes_or_is_closed(world: World) -> None:
    async with Worker(world, [closes_first, ignores_updates, price]):
        run = await start(closes_first, world=world)
        with pytest.raises(UpdateFailedError) as failed:
            await run.update("ask", 1, update_id="q")
        assert "before replying" in failed.value.reason and failed.value.update_id == "q"
        with pytest.raises(UpdateFailedError):  # asked again: the same outcome
            await run.update("ask", 1, update_id="q")
        other = await start(ignores_updates, 3, world=world)
        assert await other.result(timeout=20) == 3
        with pytest.raises(UpdateFailedError) as closed:
            await other.update("ask", 1)
        assert "completed" in closed.value.reason
    with pytest.raises(UpdateFailedError) as unknown:
        await get_run("01NOSUCHRUN0000000000000000", world=world).update("ask", 1)
    assert "no run" in unknown.value.reason


async def test_an_update_is_answered_once(world: World) -> None:
    async with Worker(world, [answers_twice]):
        run = await start(answers_twice, world=world)
        assert await run.update("ask", None) == "first"
        assert "answered already" in await run.result(timeout=20)


async def test_bad_input_is_refused_before_anything_is_sent(world: World) -> None:
    async with Worker(world, [cart, price]):
        run = await start(cart, "c-4", world=world)
        for name, update_id in (("", None), ("x" * 257, None), ("cart", ""), ("cart", "\ud800")):
            with pytest.raises(ValueError):
                await run.update(name, 1, update_id=update_id)
        with pytest.raises(TypeError):
            await run.update("cart", object())
        with pytest.raises(TypeError):
            await run.update(3, 1)  # type: ignore[arg-type]
        events = await run.events()
        assert not [e for e in events if isinstance(e, UpdateReceived)]
    with pytest.raises(NotInWorkflowError):
        receive_updates("cart")


async def test_update_with_start_starts_once_then_updates(world: World) -> None:
    async with Worker(world, [cart, price]):
        first, reply = await update_with_start(
            cart, "c-5", key="cart_id", value="c-5", name="cart", payload=["add", "apple"],
            update_id="r-1", world=world,
        )  # fmt: skip
        assert reply == 1
        again, reply = await update_with_start(
            cart, "c-5", key="cart_id", value="c-5", name="cart", payload=["add", "pear"],
            world=world,
        )  # fmt: skip
        assert again.id == first.id and reply == 2
        retried, reply = await update_with_start(
            cart, "c-5", key="cart_id", value="c-5", name="cart", payload=["add", "x"],
            update_id="r-1", world=world,
        )  # fmt: skip
        assert retried.id == first.id and reply == 1
        done, summary = await update_with_start(
            cart, "c-5", key="cart_id", value="c-5", name="cart", payload=["checkout", None],
            world=world,
        )  # fmt: skip
        assert done.id == first.id and summary["items"] == ["apple", "pear"]
        await first.result(timeout=20)
        # the holder closed: the next call starts a new run that takes the pair over
        fresh, reply = await update_with_start(
            cart, "c-5", key="cart_id", value="c-5", name="cart", payload=["add", "plum"],
            world=world,
        )  # fmt: skip
        assert fresh.id != first.id and reply == 1
        assert (await fresh.attributes())["cart_id"] == "c-5"
        assert len(await list_runs(workflow=cart, world=world)) == 2


async def test_update_with_start_under_concurrent_callers(world: World) -> None:
    async with Worker(world, [cart, price]):
        runs: set[str] = set()
        replies: dict[str, int] = {}

        async def call(n: int) -> None:
            run, reply = await update_with_start(
                cart, "c-6", key="cart_id", value="c-6", name="cart",
                payload=["add", f"i{n % 10}"], update_id=f"u{n % 10}", world=world,
            )  # fmt: skip
            runs.add(run.id)
            assert replies.setdefault(f"u{n % 10}", reply) == reply

        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(call, n)
        assert len(runs) == 1
        assert sorted(replies.values()) == list(range(1, 11))


async def test_update_with_start_conflicts_on_another_pair(world: World) -> None:
    async with Worker(world, [cart, price]):
        await start(cart, "c-7", attributes={"order": Unique("o-1")}, world=world)
        with pytest.raises(AttributeConflictError) as caught:
            await update_with_start(
                cart, "c-8", key="cart_id", value="c-8", name="cart", payload=["add", "x"],
                attributes={"order": Unique("o-1")}, world=world,
            )  # fmt: skip
        assert caught.value.key == "order"
        assert len(await list_runs(workflow=cart, world=world)) == 1
