"""Conformance: ``start_or_resume_hook``, one atomic deliver-or-create by unique pair."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import anyio
import msgspec
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    assert_dense,
    create_run,
    keyed_request,
    lease_one,
    open_worlds,
)
from worlds.types import (
    CommitRequest,
    EventKind,
    HookCreated,
    HookDelivery,
    HookReceived,
    RunCompleted,
    RunStarted,
    StartPolicy,
    utcnow,
)

__all__ = ["ResumeConformance"]


def _payloads(events: Sequence[EventKind], token: str | None = None) -> list[bytes]:
    return [
        e.payload
        for e in events
        if isinstance(e, HookReceived) and (token is None or e.token in ("", token))
    ]


class ResumeConformance(ConformanceBase):
    """Deliver to the open holder, or create the holder with the payload waiting."""

    @pytest.mark.anyio
    async def test_no_holder_creates_the_run_with_the_payload_waiting(self, world: World) -> None:
        request = keyed_request("c-1")
        delivery = HookDelivery(token="cart-c-1", payload=b"one", resume_id="r-1")
        result = await world.start_or_resume_hook(request, delivery)
        assert (result.run_id, result.created, result.hook_holder) == (request.run_id, True, None)
        assert result.run is not None and result.run.id == request.run_id
        events = await world.read_events(request.run_id)
        assert_dense(events)
        assert isinstance(events[1], HookReceived)
        assert (events[1].hook, events[1].token, events[1].payload) == (0, "cart-c-1", b"one")
        (hook,) = await world.list_hooks(request.run_id)
        assert (hook.token, hook.hook) == ("cart-c-1", 0)
        claim = await world.find_claim("cart", "c-1")
        assert claim is not None and claim.run_id == request.run_id
        assert (await lease_one(world, WF)).run_id == request.run_id

    @pytest.mark.anyio
    async def test_an_open_holder_gets_the_payload_at_its_hook(self, world: World) -> None:
        holder = await create_run(world, attributes={"cart": "c-2"}, unique={"cart"})
        item = await lease_one(world, WF)
        await world.commit(
            CommitRequest(
                run_id=holder.id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), HookCreated(hook=1, token="cart-c-2")),
            )
        )
        result = await world.start_or_resume_hook(
            keyed_request("c-2"), HookDelivery(token="cart-c-2", payload=b"x")
        )
        assert (result.run_id, result.created) == (holder.id, False)
        last = (await world.read_events(holder.id))[-1]
        assert isinstance(last, HookReceived) and (last.hook, last.payload) == (1, b"x")

    @pytest.mark.anyio
    async def test_a_payload_for_a_hook_not_yet_created_waits_and_is_bound_later(
        self, world: World
    ) -> None:
        holder = await create_run(world, attributes={"cart": "c-3"}, unique={"cart"})
        result = await world.start_or_resume_hook(
            keyed_request("c-3"), HookDelivery(token="later", payload=b"early")
        )
        assert result.run_id == holder.id and not result.created
        (hook,) = await world.list_hooks(holder.id)
        assert (hook.token, hook.hook) == ("later", 0)
        item = await lease_one(world, WF)
        created = await world.commit(
            CommitRequest(
                run_id=holder.id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), HookCreated(hook=1, token="later")),
            )
        )
        assert isinstance(created.events[-1], HookCreated)  # bound, not a conflict
        (hook,) = await world.list_hooks(holder.id)
        assert hook.hook == 1
        assert _payloads(await world.read_events(holder.id)) == [b"early"]

    @pytest.mark.anyio
    async def test_a_resume_id_delivers_once(self, world: World) -> None:
        first = await world.start_or_resume_hook(
            keyed_request("c-4"), HookDelivery(token="t4", payload=b"a", resume_id="same")
        )
        again = await world.start_or_resume_hook(
            keyed_request("c-4"), HookDelivery(token="t4", payload=b"a", resume_id="same")
        )
        assert again.run_id == first.run_id and not again.created
        assert _payloads(await world.read_events(first.run_id)) == [b"a"]

    @pytest.mark.anyio
    async def test_a_closed_holder_is_replaced(self, world: World) -> None:
        old = await create_run(world, attributes={"cart": "c-5"}, unique={"cart"})
        await world.commit(
            CommitRequest(run_id=old.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        result = await world.start_or_resume_hook(
            keyed_request("c-5"), HookDelivery(token="t5", payload=b"p")
        )
        assert result.created and result.run_id != old.id
        claim = await world.find_claim("cart", "c-5")
        assert claim is not None and claim.run_id == result.run_id and claim.generation == 2

    @pytest.mark.anyio
    async def test_a_pruned_holder_is_replaced_or_refuses_as_its_tombstone_says(
        self, world: World
    ) -> None:
        """A pair whose holder was pruned is held by a tombstone: the policy decides as
        for a closed holder (the memory and SQLite worlds used to fail, looking for the
        pruned run)."""
        for value, reuse in (("c-10", "allow_duplicate"), ("c-11", "reject_duplicate")):
            old = await create_run(world, attributes={"cart": value}, unique={"cart"})
            await world.commit(
                CommitRequest(run_id=old.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
            )
            assert await world.prune_runs(utcnow() + timedelta(seconds=1)) == [old.id]
            request = msgspec.structs.replace(
                keyed_request(value),
                policy=StartPolicy(key="cart", reuse=reuse),  # type: ignore[arg-type]
            )
            result = await world.start_or_resume_hook(
                request, HookDelivery(token=f"t-{value}", payload=b"p")
            )
            claim = await world.find_claim("cart", value)
            assert claim is not None
            if reuse == "allow_duplicate":
                assert result.created and result.run_id == request.run_id
                assert claim.run_id == request.run_id and claim.generation == 2
                assert _payloads(await world.read_events(request.run_id)) == [b"p"]
            else:
                assert not result.created and result.run_id == old.id
                assert claim.pruned_status is not None and claim.run_id == old.id
                assert await world.get_run(request.run_id) is None

    @pytest.mark.anyio
    async def test_a_token_held_by_another_run_writes_nothing(self, world: World) -> None:
        other = await create_run(world)
        item = await lease_one(world, WF)
        await world.commit(
            CommitRequest(
                run_id=other.id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), HookCreated(hook=1, token="taken")),
            )
        )
        request = keyed_request("c-6")
        result = await world.start_or_resume_hook(request, HookDelivery(token="taken", payload=b""))
        assert result.hook_holder == other.id and not result.created
        assert await world.get_run(request.run_id) is None
        assert await world.find_claim("cart", "c-6") is None

    @pytest.mark.anyio
    async def test_concurrent_callers_create_one_run_and_lose_no_payload(
        self, world_factory: WorldFactory
    ) -> None:
        callers = 24
        async with open_worlds(world_factory, 3) as opened:
            answers: list[str] = []

            async def call(n: int) -> None:
                delivery = HookDelivery(token="busy", payload=b"%d" % n, resume_id=f"r{n % 12}")
                result = await opened[n % 3].start_or_resume_hook(keyed_request("c-7"), delivery)
                answers.append(result.run_id)

            async with anyio.create_task_group() as group:
                for n in range(callers):
                    group.start_soon(call, n)
            (run_id,) = set(answers)
            received = [
                e for e in await opened[0].read_events(run_id) if isinstance(e, HookReceived)
            ]
            assert sorted(e.resume_id or "" for e in received) == sorted(f"r{n}" for n in range(12))
