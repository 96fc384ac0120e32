"""Conformance of ``hold`` slots: ``SlotRequested``/``SlotReleased`` commands and promotion.

Workflow code's ``hold(key, value, limit=n)`` commits a ``SlotRequested``; the
world settles it in that commit on the same slot rows as ``Limited`` (a slot
when one is free and nobody waits, else a place in line), drops the row on
``SlotReleased`` or when the run closes, and promotes the first waiter by
appending ``SlotAcquired`` to its log and waking its workflow.
"""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    ConformanceBase,
    WorldFactory,
    lease_all,
    new_run_id,
    open_worlds,
)
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    ErrorInfo,
    EventKind,
    Limit,
    RunCompleted,
    RunFailed,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
)

__all__ = ["HoldConformance"]

HOLD_WF = "conformance-holds"
"""The workflow name of the kit's holding runs (their items are leased by it)."""


async def _run(world: World) -> str:
    """A new run whose workflow item was taken (it is running, nothing due)."""
    run_id = new_run_id()
    result = await world.create_run(CreateRunRequest(run_id=run_id, workflow=HOLD_WF, args=b""))
    assert result.run is not None
    await _woken(world)
    return run_id


async def _commit(world: World, run_id: str, event: EventKind) -> tuple[EventKind, ...]:
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="holder", events=(event,)))
    assert result.ok, f"commit of {event!r} to {run_id} refused: {result!r}"
    return result.events


async def _request(world: World, run_id: str, value: str, limit: int, hold: int = 1) -> bool:
    """Commit a ``SlotRequested``; whether the slot was taken at once."""
    event = SlotRequested(hold=hold, key="gpu", value=value, limit=limit)
    (stored,) = await _commit(world, run_id, event)
    assert isinstance(stored, SlotRequested) and stored.hold == hold, f"stored {stored!r}"
    return stored.acquired


async def _woken(world: World) -> set[str]:
    """The runs whose workflow items are due now; each is leased and done with
    (acknowledged), as a worker does, so a later wake makes it due again."""
    items = await lease_all(world, {HOLD_WF})
    for item in items:
        done = CommitRequest(run_id=item.run_id, worker_id="probe", lease=item)
        assert (await world.commit(done)).ok
    return {item.run_id for item in items}


async def _acquired(world: World, run_id: str) -> list[int]:
    return [e.hold for e in await world.read_events(run_id) if isinstance(e, SlotAcquired)]


async def _line(world: World, value: str) -> tuple[list[str], list[str]]:
    rows = await world.list_slots("gpu", value)
    return [s.run_id for s in rows if s.holding], [s.run_id for s in rows if not s.holding]


class HoldConformance(ConformanceBase):
    """``hold`` inside workflows: acquire, wait, release, promotion, close."""

    @pytest.mark.anyio
    async def test_a_hold_takes_a_free_slot_or_waits_in_line(self, world: World) -> None:
        """Up to ``limit`` holds take a slot at once (``acquired``); the rest wait."""
        runs = [await _run(world) for _ in range(4)]
        assert [await _request(world, run_id, "a100", 2) for run_id in runs] == [
            True,
            True,
            False,
            False,
        ]
        assert await _line(world, "a100") == (runs[:2], runs[2:])
        mine = await world.run_slots(runs[2])
        assert [(s.key, s.value, s.limit, s.holding, s.hold) for s in mine] == [
            ("gpu", "a100", 2, False, 1)
        ]
        assert await _woken(world) == set()  # a waiter gets no work

    @pytest.mark.anyio
    async def test_a_hold_asking_another_limit_is_refused(self, world: World) -> None:
        """A ``SlotRequested`` whose limit is not the pair's (its holders') is stored
        ``refused`` with the pair's limit, and no row is written."""
        holder, other = await _run(world), await _run(world)
        assert await _request(world, holder, "one-limit", 1)
        (stored,) = await _commit(
            world, other, SlotRequested(hold=1, key="gpu", value="one-limit", limit=2)
        )
        assert isinstance(stored, SlotRequested)
        assert (stored.acquired, stored.refused) == (False, 1)
        assert await _line(world, "one-limit") == ([holder], [])
        await _commit(world, holder, SlotReleased(hold=1))
        assert await _request(world, other, "one-limit", 2, hold=2)  # empty pair: any limit

    @pytest.mark.anyio
    async def test_a_reopened_run_inside_a_block_takes_its_slot_again(self, world: World) -> None:
        """Reopening a run that closed inside a ``hold`` block takes that slot again
        first: with the pair full the run waits pending, then is promoted with its work."""
        first, holder = await _run(world), await _run(world)
        assert await _request(world, first, "again", 1)
        await _commit(world, first, RunFailed(error=ErrorInfo("E", "boom")))
        assert await _line(world, "again") == ([], [])
        assert await _request(world, holder, "again", 1)
        reopened = await world.reopen_run(first, "kit")
        assert reopened is not None and reopened.status == RunStatus.PENDING
        assert await _line(world, "again") == ([holder], [first])
        assert await _woken(world) == set()
        await _commit(world, holder, SlotReleased(hold=1))
        assert await _woken(world) == {first}
        assert await _line(world, "again") == ([first], [])
        assert [(s.hold, s.holding) for s in await world.run_slots(first)] == [(1, True)]
        record = await world.get_run(first)
        assert record is not None and record.status == RunStatus.RUNNING
        await _commit(world, first, SlotReleased(hold=1))  # the re-run block ends
        assert await _line(world, "again") == ([], [])

    @pytest.mark.anyio
    async def test_a_release_promotes_the_first_waiter_and_wakes_it(self, world: World) -> None:
        """``SlotReleased`` frees the slot in its commit; the first waiter gets
        ``SlotAcquired`` in its log and a workflow item; the others keep waiting."""
        runs = [await _run(world) for _ in range(4)]
        for run_id in runs:
            await _request(world, run_id, "fifo", 1, hold=3)
        order: list[str] = []
        for holder in runs[:-1]:
            await _commit(world, holder, SlotReleased(hold=3))
            woken = await _woken(world)
            assert len(woken) == 1
            (promoted,) = woken
            assert await _acquired(world, promoted) == [3]
            order.append(promoted)
        assert order == runs[1:]
        assert await _line(world, "fifo") == ([runs[-1]], [])

    @pytest.mark.anyio
    async def test_holds_and_start_time_waiters_share_one_line(self, world: World) -> None:
        """A ``Limited`` start and a ``hold`` of the same pair queue together, in
        arrival order; a newcomer never passes a waiter."""
        holder = await _run(world)
        assert await _request(world, holder, "mixed", 1)
        limited = new_run_id()
        request = CreateRunRequest(
            run_id=limited,
            workflow=HOLD_WF,
            args=b"",
            attributes={"gpu": "mixed"},
            limits={"gpu": Limit(limit=1)},
        )
        assert (await world.create_run(request)).run is not None
        late = await _run(world)
        assert not await _request(world, late, "mixed", 1)
        assert await _line(world, "mixed") == ([holder], [limited, late])
        await _commit(world, holder, SlotReleased(hold=1))
        assert await _woken(world) == {limited}
        assert await _acquired(world, limited) == []  # a start-time slot: only its item
        await _commit(world, limited, RunCompleted(result=b""))
        assert await _woken(world) == {late}
        assert await _acquired(world, late) == [1]

    @pytest.mark.anyio
    async def test_closing_a_run_releases_its_holds(self, world: World) -> None:
        """A run's close drops its slots and places in line, whatever the outcome."""
        holder, waiter, behind = [await _run(world) for _ in range(3)]
        for run_id in (holder, waiter, behind):
            await _request(world, run_id, "close", 1)
        await world.cancel_run(waiter, "gone")
        assert await _line(world, "close") == ([holder], [behind])
        await _commit(world, holder, RunFailed(error=_error()))
        record = await world.get_run(holder)
        assert record is not None and record.status == RunStatus.FAILED
        assert await _line(world, "close") == ([behind], [])
        assert await _acquired(world, behind) == [1]
        assert await world.run_slots(holder) == []

    @pytest.mark.anyio
    async def test_releasing_a_place_in_line_leaves_it(self, world: World) -> None:
        """A waiter that gives up (a cancelled wait) leaves the line; nobody else moves."""
        holder, waiter, behind = [await _run(world) for _ in range(3)]
        for run_id in (holder, waiter, behind):
            await _request(world, run_id, "leave", 1)
        await _commit(world, waiter, SlotReleased(hold=1))
        assert await _line(world, "leave") == ([holder], [behind])
        assert await _woken(world) == set()
        assert await _acquired(world, waiter) == []

    @pytest.mark.anyio
    async def test_a_full_pair_never_delays_another(self, world: World) -> None:
        """One run may hold two pairs by two holds; each pair's line is its own."""
        blocker, run_id = await _run(world), await _run(world)
        assert await _request(world, blocker, "p", 1)
        assert not await _request(world, run_id, "p", 1, hold=1)
        other = await _run(world)
        assert await _request(world, other, "q", 1)
        await _commit(world, other, SlotReleased(hold=1))
        assert await _request(world, run_id, "q", 1, hold=2) is True

    @pytest.mark.anyio
    async def test_concurrent_holds_never_exceed_the_limit(
        self, world_factory: WorldFactory
    ) -> None:
        """Many runs over several connections request and release one pair at once:
        holders never exceed the limit, and every run is served once."""
        limit, count = 2, 16
        async with open_worlds(world_factory, 4) as opened:
            runs = [await _run(opened[0]) for _ in range(count)]
            samples: list[int] = []

            async def requester(index: int) -> None:
                await _request(opened[index % 4], runs[index], "contended", limit)

            async def sampler() -> None:
                for _ in range(20):
                    holders, _ = await _line(opened[0], "contended")
                    samples.append(len(holders))
                    await anyio.sleep(0.005)

            async with anyio.create_task_group() as group:
                group.start_soon(sampler)
                for index in range(count):
                    group.start_soon(requester, index)
            served: set[str] = set()
            with anyio.fail_after(60):
                while len(served) < count:
                    holders, _ = await _line(opened[1], "contended")
                    samples.append(len(holders))
                    assert len(holders) == min(limit, count - len(served))
                    async with anyio.create_task_group() as group:
                        for n, holder in enumerate(holders):
                            release = SlotReleased(hold=1)
                            group.start_soon(_commit, opened[n % 4], holder, release)
                    served |= set(holders)
            assert max(samples) <= limit
            assert served == set(runs)


def _error() -> ErrorInfo:
    return ErrorInfo(type="RuntimeError", message="boom")
