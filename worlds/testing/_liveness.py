"""Conformance: worker liveness (RFC 0001): heartbeats, takeover after death, no
takeover during a world-wide stall, an item its holder forgot, and a fenced zombie.

The tests run on the machine's clock with a liveness window of ``WINDOW``; the
workers that must look alive heartbeat every tenth of it from a task of their
own (``_beating``), as a worker's heartbeat loop would.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import STEP, ConformanceBase, new_run_id, run_with_steps
from worlds.types import CommitRequest, StepCompleted, WorkerInfo, WorkerRecord, WorkItem

__all__ = ["LivenessConformance"]

WINDOW = 1.0
"""The liveness window of the kit's workers, in seconds."""

_BEAT = WINDOW / 10
"""How often a beating worker heartbeats."""


def _info(worker_id: str) -> WorkerInfo:
    return WorkerInfo(
        id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        build_id="conformance",
        liveness_seconds=WINDOW,
    )


async def _register(world: World, *worker_ids: str) -> None:
    for worker_id in worker_ids:
        record = await world.register_worker(_info(worker_id))
        assert (record.id, record.status, record.in_flight) == (worker_id, "live", 0)


async def _workers(world: World) -> dict[str, WorkerRecord]:
    return {record.id: record for record in await world.list_workers()}


@asynccontextmanager
async def _beating(world: World, worker_ids: Collection[str]) -> AsyncIterator[None]:
    """Heartbeat ``worker_ids`` every ``_BEAT`` seconds until the block ends; each
    heartbeat must be answered True."""

    async def beat() -> None:
        while True:
            for worker_id in worker_ids:
                assert await world.heartbeat(worker_id, 1), f"{worker_id} was fenced"
            await anyio.sleep(_BEAT)

    async with anyio.create_task_group() as group:
        group.start_soon(beat)
        yield
        group.cancel_scope.cancel()


async def _step_leased_by(world: World, worker_id: str, lease_seconds: float) -> WorkItem:
    """A fresh run's step item, leased by ``worker_id`` for ``lease_seconds``."""
    await run_with_steps(world)
    items = await world.lease(worker_id, names={STEP}, limit=10, lease_seconds=lease_seconds)
    assert len(items) == 1, f"expected the new run's step, got {items!r}"
    return items[0]


async def _poll_take(world: World, worker_id: str, within: float) -> list[WorkItem]:
    """Lease ``STEP`` items as ``worker_id`` until some come, for up to ``within`` s."""
    with anyio.move_on_after(within):
        while True:
            items = await world.lease(worker_id, names={STEP}, limit=10, lease_seconds=30.0)
            if items:
                return items
            await anyio.sleep(_BEAT / 2)
    return []


def _completion(item: WorkItem, worker_id: str) -> CommitRequest:
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker_id,
        lease=item,
        events=(StepCompleted(step=item.number, attempt=item.attempt, result=b"done"),),
        ack=True,
    )


class LivenessConformance(ConformanceBase):
    """Registered workers heartbeat; their items follow their liveness, not the
    lease timer; a worker declared dead is fenced."""

    @pytest.mark.anyio
    async def test_a_heartbeat_is_recorded_with_the_in_flight_count(self, world: World) -> None:
        """``list_workers`` shows each registered worker, its last heartbeat and the
        count it reported; an unknown or stopped worker's heartbeat answers False."""
        holder, other = f"live-a-{new_run_id()}", f"live-b-{new_run_id()}"
        await _register(world, holder, other)
        before = (await _workers(world))[holder]
        assert before.build_id == "conformance" and before.pid == os.getpid()
        await anyio.sleep(0.01)
        assert await world.heartbeat(holder, 3)
        after = await _workers(world)
        assert after[holder].in_flight == 3 and after[holder].status == "live"
        assert after[holder].last_heartbeat_at > before.last_heartbeat_at
        assert after[holder].started_at == before.started_at
        assert after[other].in_flight == 0
        assert not await world.heartbeat(f"never-{new_run_id()}", 0)
        await world.unregister_worker(other)
        assert (await _workers(world))[other].status == "stopped"
        assert not await world.heartbeat(other, 0), "a stopped worker's heartbeat is refused"

    @pytest.mark.anyio
    async def test_a_live_holder_keeps_its_item_after_its_lease_runs_out(
        self, world: World
    ) -> None:
        """While its holder heartbeats, an item is not taken over when its own lease
        timer runs out, and the holder's commit lands."""
        holder, other = f"live-a-{new_run_id()}", f"live-b-{new_run_id()}"
        await _register(world, holder, other)
        async with _beating(world, (holder, other)):
            item = await _step_leased_by(world, holder, lease_seconds=0.1)
            await anyio.sleep(WINDOW * 0.6)
            taken = await world.lease(other, names={STEP}, limit=10, lease_seconds=30.0)
            assert taken == [], "an item of a live holder was taken when its lease ran out"
            assert (await _workers(world))[holder].status == "live"
            result = await world.commit(_completion(item, holder))
        assert result.ok, f"the live holder's commit was refused: {result!r}"

    @pytest.mark.anyio
    async def test_an_item_its_live_holder_forgot_is_taken_over(self, world: World) -> None:
        """A holder that heartbeats but stopped renewing an item (it dropped it) loses
        that item about a window after its lease ran out, and stays live."""
        holder = f"live-a-{new_run_id()}"
        await _register(world, holder)
        item = await _step_leased_by(world, holder, lease_seconds=0.1)
        async with _beating(world, (holder,)):
            taken = await _poll_take(world, "probe", within=WINDOW * 6)
        assert [(i.id, i.attempt) for i in taken] == [(item.id, item.attempt + 1)]
        assert (await _workers(world))[holder].status == "live"
        assert await world.heartbeat(holder, 0), "forgetting an item does not fence"

    @pytest.mark.anyio
    async def test_a_dead_holder_is_taken_over_and_fenced(self, world: World) -> None:
        """A holder that stops heartbeating while another worker beats is declared dead
        within about a window: its item is taken (a new attempt), it shows dead, its
        stale commit is refused and its heartbeat answers False."""
        holder, other = f"live-a-{new_run_id()}", f"live-b-{new_run_id()}"
        await _register(world, holder, other)
        item = await _step_leased_by(world, holder, lease_seconds=0.1)
        async with _beating(world, (other,)):
            taken = await _poll_take(world, other, within=WINDOW * 6)
        assert [(i.run_id, i.id) for i in taken] == [(item.run_id, item.id)], (
            "a dead holder's item was not taken over"
        )
        assert taken[0].attempt == item.attempt + 1
        assert (await _workers(world))[holder].status == "dead"
        stale = await world.commit(_completion(item, holder))
        assert not stale.ok and stale.lease_lost
        assert not await world.heartbeat(holder, 1), "a dead worker's heartbeat is refused"
        assert (await world.commit(_completion(taken[0], other))).ok

    @pytest.mark.anyio
    async def test_no_takeover_during_a_world_wide_stall(self, world: World) -> None:
        """When no heartbeat reaches the world for longer than a window (a frozen or
        unreachable world), nobody is declared dead when it comes back: the first
        worker to beat again cannot take its peer's item, which stays its holder's."""
        holder, other = f"live-a-{new_run_id()}", f"live-b-{new_run_id()}"
        await _register(world, holder, other)
        async with _beating(world, (holder, other)):
            item = await _step_leased_by(world, holder, lease_seconds=0.1)
            await anyio.sleep(WINDOW * 0.6)
        await anyio.sleep(WINDOW * 2)  # the stall: no heartbeat from anybody
        assert await world.heartbeat(other, 0), "the world came back"
        taken = await world.lease(other, names={STEP}, limit=10, lease_seconds=30.0)
        assert taken == [], "a world-wide stall expired a live holder"
        assert (await _workers(world))[holder].status == "silent"
        assert await world.heartbeat(holder, 1), "the holder was fenced by a stall"
        async with _beating(world, (holder, other)):
            await anyio.sleep(WINDOW * 0.6)
            taken = await world.lease(other, names={STEP}, limit=10, lease_seconds=30.0)
            assert taken == [], "the holder, beating again, lost its item"
            result = await world.commit(_completion(item, holder))
        assert result.ok, f"the holder's commit after the stall was refused: {result!r}"

    @pytest.mark.anyio
    async def test_a_fenced_zombie_commits_nothing(self, world: World) -> None:
        """Once declared dead, a worker's every lease is revoked, even one whose timer
        has not run out: it commits nothing, leases nothing, and cannot register
        again under its id."""
        holder, other = f"live-a-{new_run_id()}", f"live-b-{new_run_id()}"
        await _register(world, holder, other)
        short = await _step_leased_by(world, holder, lease_seconds=0.1)
        long = await _step_leased_by(world, holder, lease_seconds=60.0)
        async with _beating(world, (other,)):
            taken = await _poll_take(world, other, within=WINDOW * 6)
            assert short.id in {i.id for i in taken}, "the dead holder's item was not taken"
            if long.id not in {i.id for i in taken}:  # revoked: free at the next lease
                taken += await _poll_take(world, other, within=WINDOW * 2)
        assert {i.id for i in taken} == {short.id, long.id}, (
            "the item whose lease had not run out stayed the zombie's"
        )
        refused = await world.commit(_completion(long, holder))
        assert not refused.ok and refused.lease_lost and refused.lease_holder == other
        await run_with_steps(world)
        assert await world.lease(holder, names={STEP}, limit=10, lease_seconds=30.0) == [], (
            "a fenced worker leased work"
        )
        assert not await world.heartbeat(holder, 0)
        with pytest.raises(ValueError):
            await world.register_worker(_info(holder))
