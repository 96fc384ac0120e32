"""Conformance: updates (``send_update``, ``update_outcome``, ``update_with_start``).

An update id is accepted once per run, its answer is the first one the log
records, a closed run refuses; update-with-start delivers to the open holder
of its pair or creates the holder with the update waiting, atomically.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
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
    new_run_id,
    open_worlds,
)
from worlds.types import (
    CommitRequest,
    EventKind,
    RunCompleted,
    RunStarted,
    UpdateDelivery,
    UpdateReceived,
    UpdateRejected,
    UpdateReplied,
)

__all__ = ["UpdateConformance"]


def _received(events: Sequence[EventKind]) -> list[UpdateReceived]:
    return [e for e in events if isinstance(e, UpdateReceived)]


async def _answer(world: World, run_id: str, *events: EventKind) -> None:
    """Commit ``events`` as the run's workflow would (leasing its workflow item)."""
    item = await lease_one(world, WF)
    assert item.run_id == run_id
    result = await world.commit(
        CommitRequest(run_id=run_id, worker_id=WORKER, lease=item, events=events)
    )
    assert result.ok, result


class UpdateConformance(ConformanceBase):
    """Updates: delivered once per id, answered once, refused by a closed run."""

    @pytest.mark.anyio
    async def test_an_update_is_appended_and_wakes_the_workflow(self, world: World) -> None:
        run = await create_run(world)
        await _answer(world, run.id, RunStarted())  # its first task done: nothing due
        assert await world.lease(WORKER, names={WF}, limit=10, lease_seconds=30) == []
        delivery = UpdateDelivery(name="add", update_id="u-1", payload=b"apple")
        outcome = await world.send_update(run.id, delivery)
        assert (outcome.run_id, outcome.state) == (run.id, "pending")
        events = await world.read_events(run.id)
        assert_dense(events)
        (received,) = _received(events)
        assert (received.name, received.update_id, received.payload) == ("add", "u-1", b"apple")
        assert await world.update_outcome(run.id, "u-1") == outcome
        assert await world.update_outcome(run.id, "u-2") is None
        assert (await lease_one(world, WF)).run_id == run.id  # woken

    @pytest.mark.anyio
    async def test_the_first_recorded_answer_is_every_callers(self, world: World) -> None:
        run = await create_run(world)
        await world.send_update(run.id, UpdateDelivery(name="add", update_id="u", payload=b""))
        await _answer(
            world,
            run.id,
            RunStarted(),
            UpdateReplied(update_id="u", result=b"one"),
            UpdateReplied(update_id="u", result=b"two"),
        )
        outcome = await world.update_outcome(run.id, "u")
        assert outcome is not None and (outcome.state, outcome.result) == ("replied", b"one")
        again = await world.send_update(
            run.id, UpdateDelivery(name="add", update_id="u", payload=b"x")
        )
        assert again == outcome
        assert len(_received(await world.read_events(run.id))) == 1

    @pytest.mark.anyio
    async def test_a_rejection_is_an_outcome(self, world: World) -> None:
        run = await create_run(world)
        await world.send_update(run.id, UpdateDelivery(name="add", update_id="r", payload=b""))
        await _answer(world, run.id, RunStarted(), UpdateRejected(update_id="r", message="no"))
        outcome = await world.update_outcome(run.id, "r")
        assert outcome is not None and (outcome.state, outcome.message) == ("rejected", "no")

    @pytest.mark.anyio
    async def test_a_closed_run_refuses_and_an_unanswered_update_fails(self, world: World) -> None:
        run = await create_run(world)
        await world.send_update(run.id, UpdateDelivery(name="add", update_id="a", payload=b""))
        await world.send_update(run.id, UpdateDelivery(name="add", update_id="b", payload=b""))
        await _answer(
            world,
            run.id,
            RunStarted(),
            UpdateReplied(update_id="a", result=b"ok"),
            RunCompleted(result=b""),
        )
        replied = await world.update_outcome(run.id, "a")
        assert replied is not None and replied.state == "replied"  # kept after the close
        failed = await world.update_outcome(run.id, "b")
        assert failed is not None and failed.state == "failed"
        assert failed.message and "completed" in failed.message
        late = await world.send_update(
            run.id, UpdateDelivery(name="add", update_id="c", payload=b"")
        )
        assert late.state == "failed" and late.message and "completed" in late.message
        assert await world.update_outcome(run.id, "c") is None  # nothing written
        repeated = await world.send_update(
            run.id, UpdateDelivery(name="add", update_id="a", payload=b"")
        )
        assert repeated == replied
        unknown = await world.send_update(
            new_run_id(), UpdateDelivery(name="add", update_id="a", payload=b"")
        )
        assert unknown.state == "failed"

    @pytest.mark.anyio
    async def test_bad_names_and_ids_write_nothing(self, world: World) -> None:
        run = await create_run(world)
        for name, update_id in (("", "u"), ("add", ""), ("x" * 257, "u"), ("add", "\ud800")):
            with pytest.raises(ValueError):
                await world.send_update(
                    run.id, UpdateDelivery(name=name, update_id=update_id, payload=b"")
                )
        assert _received(await world.read_events(run.id)) == []

    @pytest.mark.anyio
    async def test_concurrent_callers_deliver_each_update_id_once(
        self, world_factory: WorldFactory
    ) -> None:
        callers = 20
        async with open_worlds(world_factory, 4) as opened:
            run = await create_run(opened[0])
            outcomes = []

            async def call(n: int) -> None:
                delivery = UpdateDelivery(name="add", update_id=f"u{n % 5}", payload=b"%d" % n)
                outcomes.append(await opened[n % 4].send_update(run.id, delivery))

            async with anyio.create_task_group() as group:
                for n in range(callers):
                    group.start_soon(call, n)
            assert {o.state for o in outcomes} == {"pending"} and len(outcomes) == callers
            events = await opened[0].read_events(run.id)
            assert_dense(events)
            assert sorted(e.update_id for e in _received(events)) == [f"u{n}" for n in range(5)]

    @pytest.mark.anyio
    async def test_update_with_start_creates_the_holder_with_the_update(self, world: World) -> None:
        request = keyed_request("c-1")
        delivery = UpdateDelivery(name="add", update_id="u-1", payload=b"one")
        started = await world.update_with_start(request, delivery)
        assert (started.run_id, started.created) == (request.run_id, True)
        assert started.outcome.state == "pending" and started.conflict is None
        events = await world.read_events(request.run_id)
        assert_dense(events)
        assert [e.update_id for e in _received(events)] == ["u-1"]
        claim = await world.find_claim("cart", "c-1")
        assert claim is not None and claim.run_id == request.run_id
        again = await world.update_with_start(keyed_request("c-1"), delivery)
        assert (again.run_id, again.created) == (request.run_id, False)
        other = UpdateDelivery(name="add", update_id="u-2", payload=b"two")
        second = await world.update_with_start(keyed_request("c-1"), other)
        assert (second.run_id, second.created) == (request.run_id, False)
        received = _received(await world.read_events(request.run_id))
        assert [e.update_id for e in received] == ["u-1", "u-2"]

    @pytest.mark.anyio
    async def test_update_with_start_takes_over_from_a_closed_holder(self, world: World) -> None:
        first = await world.update_with_start(
            keyed_request("c-2"), UpdateDelivery(name="add", update_id="u-1", payload=b"")
        )
        await _answer(world, first.run_id, RunStarted(), RunCompleted(result=b""))
        request = keyed_request("c-2")
        started = await world.update_with_start(
            request, UpdateDelivery(name="add", update_id="u-2", payload=b"")
        )
        assert (started.run_id, started.created) == (request.run_id, True)
        claim = await world.find_claim("cart", "c-2")
        assert claim is not None and claim.run_id == request.run_id and claim.generation == 2

    @pytest.mark.anyio
    async def test_update_with_start_under_contention_starts_one_run(
        self, world_factory: WorldFactory
    ) -> None:
        callers = 20
        async with open_worlds(world_factory, 4) as opened:
            results = []

            async def call(n: int) -> None:
                delivery = UpdateDelivery(name="add", update_id=f"u{n % 10}", payload=b"")
                results.append(
                    await opened[n % 4].update_with_start(keyed_request("c-9"), delivery)
                )

            async with anyio.create_task_group() as group:
                for n in range(callers):
                    group.start_soon(call, n)
            (run_id,) = {r.run_id for r in results}
            assert sum(r.created for r in results) == 1
            received = _received(await opened[0].read_events(run_id))
            assert sorted(e.update_id for e in received) == sorted(f"u{n}" for n in range(10))
