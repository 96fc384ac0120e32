"""Conformance of limited pairs: slots at start, waiting, promotion, contention, delay."""

from __future__ import annotations

from collections.abc import Mapping

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import (
    SHORT_DELAY,
    ConformanceBase,
    WorldFactory,
    lease_all,
    new_run_id,
    open_worlds,
    soon,
)
from worlds.types import (
    AttributeValue,
    CommitRequest,
    CreateRunRequest,
    CreateRunResult,
    ErrorInfo,
    EventKind,
    Limit,
    RunCompleted,
    RunContinued,
    RunFailed,
    RunStarted,
    RunStatus,
    Slot,
)

__all__ = ["SlotsConformance"]

SLOT_WF = "conformance-slots"
"""The workflow name of the kit's limited runs (their items are leased by it)."""


async def _start(
    world: World,
    limits: Mapping[str, Limit],
    attributes: Mapping[str, AttributeValue],
    *,
    workflow: str = SLOT_WF,
    unique: frozenset[str] = frozenset(),
) -> CreateRunResult:
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=workflow,
        args=b"",
        attributes=dict(attributes),
        unique=unique,
        limits=dict(limits),
    )
    result = await world.create_run(request)
    assert (result.run is None) != (result.conflict is None), f"odd result {result!r}"
    return result


async def _limited(world: World, value: str, limit: int, on_full: str = "queue") -> str:
    """Start a run holding or waiting at ``tenant=value``; return its id."""
    result = await _start(
        world,
        {"tenant": Limit(limit=limit, on_full=on_full)},  # type: ignore[arg-type]
        {"tenant": value},
    )
    assert result.run is not None, f"the start was refused: {result.conflict!r}"
    assert result.run.status == RunStatus.PENDING
    return result.run.id


async def _close(world: World, run_id: str, event: EventKind) -> None:
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="closer", events=(event,)))
    assert result.ok and result.status.is_closed, f"closing {run_id} failed: {result!r}"


def _split(rows: list[Slot]) -> tuple[list[str], list[str]]:
    """Holders and waiters (in the order the world lists them)."""
    return [s.run_id for s in rows if s.holding], [s.run_id for s in rows if not s.holding]


async def _woken(world: World, workflow: str = SLOT_WF) -> set[str]:
    """The runs whose workflow items are leasable now (leased to a probe)."""
    return {item.run_id for item in await lease_all(world, {workflow})}


class SlotsConformance(ConformanceBase):
    """``CreateRunRequest.limits``: holders, waiters, promotion and ``list_slots``."""

    @pytest.mark.anyio
    async def test_a_full_pair_queues_runs_without_work(self, world: World) -> None:
        """Up to ``limit`` runs hold a slot and get work; the rest wait with none."""
        runs = [await _limited(world, "acme", 2) for _ in range(5)]
        holders, waiters = _split(await world.list_slots("tenant", "acme"))
        assert holders == runs[:2] and waiters == runs[2:]
        assert await _woken(world) == set(runs[:2])
        for run_id in runs:
            record = await world.get_run(run_id)
            assert record is not None and record.status == RunStatus.PENDING
            assert record.attributes == {"tenant": "acme"}
        mine = await world.run_slots(runs[3])
        assert [(s.key, s.value, s.limit, s.holding) for s in mine] == [
            ("tenant", "acme", 2, False)
        ]

    @pytest.mark.anyio
    async def test_on_full_fail_names_a_holder_and_creates_nothing(self, world: World) -> None:
        """A full ``on_full="fail"`` pair refuses: the conflict names a holder and the limit."""
        holders = [await _limited(world, "acme", 2) for _ in range(2)]
        run_id = new_run_id()
        request = CreateRunRequest(
            run_id=run_id,
            workflow=SLOT_WF,
            args=b"",
            attributes={"tenant": "acme"},
            limits={"tenant": Limit(limit=2, on_full="fail")},
        )
        result = await world.create_run(request)
        assert result.run is None and result.conflict is not None
        assert result.conflict.key == "tenant" and result.conflict.value == "acme"
        assert result.conflict.holder_run_id in holders
        assert result.conflict.limit == 2
        assert await world.get_run(run_id) is None
        assert _split(await world.list_slots("tenant", "acme")) == (holders, [])

    @pytest.mark.anyio
    async def test_a_pair_has_one_limit_at_a_time(self, world: World) -> None:
        """A start asking another limit than the pair's holders refuses with ``ValueError``
        and writes nothing; once the pair is empty, another limit may start it."""
        holders = [await _limited(world, "acme", 2) for _ in range(2)]
        for limit in (Limit(limit=3, on_full="fail"), Limit(limit=1)):
            request = CreateRunRequest(
                run_id=new_run_id(),
                workflow=SLOT_WF,
                args=b"",
                attributes={"tenant": "acme"},
                limits={"tenant": limit},
            )
            with pytest.raises(ValueError, match="limited to 2"):
                await world.create_run(request)
            assert await world.get_run(request.run_id) is None
        assert _split(await world.list_slots("tenant", "acme")) == (holders, [])
        for run_id in holders:
            await _close(world, run_id, RunCompleted(result=b""))
        assert await _limited(world, "acme", 3)

    @pytest.mark.anyio
    async def test_a_reopened_run_takes_its_slot_again(self, world: World) -> None:
        """A reopened run takes its start-time slots again: while the pair is
        full it waits pending, with no work, and goes on (running) when promoted."""
        first = await _limited(world, "acme", 1)
        await _close(world, first, RunFailed(error=ErrorInfo("E", "boom")))
        holder = await _limited(world, "acme", 1)
        await lease_all(world, {SLOT_WF})  # the holder's item, out of the way
        reopened = await world.reopen_run(first, "kit")
        assert reopened is not None and reopened.status == RunStatus.PENDING
        assert _split(await world.list_slots("tenant", "acme")) == ([holder], [first])
        assert await _woken(world) == set()
        await _close(world, holder, RunCompleted(result=b""))
        record = await world.get_run(first)
        assert record is not None and record.status == RunStatus.RUNNING
        assert _split(await world.list_slots("tenant", "acme")) == ([first], [])
        assert await _woken(world) == {first}

    @pytest.mark.anyio
    async def test_closing_a_holder_promotes_the_first_waiter(self, world: World) -> None:
        """Whatever the outcome (completed, failed, cancelled), a closed holder's slot
        goes to the pair's first waiter, which gets its workflow item at once."""
        runs = [await _limited(world, "acme", 1) for _ in range(4)]
        assert await _woken(world) == {runs[0]}
        await _close(world, runs[0], RunCompleted(result=b""))
        assert _split(await world.list_slots("tenant", "acme")) == ([runs[1]], runs[2:])
        assert await _woken(world) == {runs[1]}
        await _close(world, runs[1], RunFailed(error=ErrorInfo(type="E", message="boom")))
        assert await _woken(world) == {runs[2]}
        cancelled = await world.cancel_run(runs[2], "stop")
        assert cancelled is not None and cancelled.status == RunStatus.CANCELLED
        assert _split(await world.list_slots("tenant", "acme")) == ([runs[3]], [])
        assert await _woken(world) == {runs[3]}
        assert await world.run_slots(runs[0]) == []

    @pytest.mark.anyio
    async def test_a_cancelled_waiter_leaves_the_line(self, world: World) -> None:
        """Cancelling a waiting run closes it and drops its place; the next keeps its turn."""
        runs = [await _limited(world, "acme", 1) for _ in range(3)]
        record = await world.request_cancel(runs[1], "no longer needed", 5.0)
        assert record is not None and record.status == RunStatus.CANCELLED
        assert _split(await world.list_slots("tenant", "acme")) == ([runs[0]], [runs[2]])
        await _close(world, runs[0], RunCompleted(result=b""))
        assert _split(await world.list_slots("tenant", "acme")) == ([runs[2]], [])

    @pytest.mark.anyio
    async def test_a_full_pair_never_delays_another_pair(self, world: World) -> None:
        """Runs of another value (or key) hold at once while one pair is full."""
        full = [await _limited(world, "acme", 1) for _ in range(3)]
        other = await _limited(world, "globex", 1)
        assert await _woken(world) == {full[0], other}
        result = await _start(world, {"region": Limit(limit=1)}, {"region": "acme"})
        assert result.run is not None
        assert [s.holding for s in await world.run_slots(result.run.id)] == [True]

    @pytest.mark.anyio
    async def test_a_run_waits_in_all_its_pairs_and_holds_none(self, world: World) -> None:
        """With two limited keys, a run takes both slots or waits in both, holding none;
        it is promoted when both have room and it is first in line in both."""
        limits = {"tenant": Limit(limit=1), "region": Limit(limit=1)}
        a = await _start(world, {"tenant": Limit(limit=1)}, {"tenant": "acme"})
        both = await _start(world, limits, {"tenant": "acme", "region": "eu"})
        b = await _start(world, {"region": Limit(limit=1)}, {"region": "eu"})
        assert a.run is not None and both.run is not None and b.run is not None
        # region=eu has a free slot, but ``b`` came after ``both``: first in, first out
        assert [s.holding for s in await world.run_slots(both.run.id)] == [False, False]
        assert [s.holding for s in await world.run_slots(b.run.id)] == [False]
        await _close(world, a.run.id, RunCompleted(result=b""))
        assert [s.holding for s in await world.run_slots(both.run.id)] == [True, True]
        assert [s.holding for s in await world.run_slots(b.run.id)] == [False]
        await _close(world, both.run.id, RunCompleted(result=b""))
        assert [s.holding for s in await world.run_slots(b.run.id)] == [True]

    @pytest.mark.anyio
    async def test_continue_as_new_keeps_the_slot(self, world: World) -> None:
        """A holder that continues as new hands its slot to the next run; waiters wait on."""
        runs = [await _limited(world, "acme", 1) for _ in range(2)]
        next_id = new_run_id()
        event = RunContinued(next_run_id=next_id, args=b"")
        result = await world.commit(
            CommitRequest(run_id=runs[0], worker_id="w", events=(RunStarted(), event))
        )
        assert result.ok
        assert _split(await world.list_slots("tenant", "acme")) == ([next_id], [runs[1]])
        await _close(world, next_id, RunCompleted(result=b""))
        assert _split(await world.list_slots("tenant", "acme")) == ([runs[1]], [])

    @pytest.mark.anyio
    async def test_limits_are_checked(self, world: World) -> None:
        """A limited key must have a value, may not also be unique, and needs a limit >= 1."""
        bad = [
            ({"tenant": Limit(limit=1)}, {}, frozenset()),
            ({"tenant": Limit(limit=0)}, {"tenant": "a"}, frozenset()),
            ({"tenant": Limit(limit=1)}, {"tenant": "a"}, frozenset({"tenant"})),
        ]
        for limits, attributes, unique in bad:
            with pytest.raises(ValueError):
                await _start(world, limits, attributes, unique=unique)
        assert await world.list_slots("tenant", "a") == []

    @pytest.mark.anyio
    async def test_start_at_delays_the_first_workflow_item(self, world: World) -> None:
        """``start_at``: the run is pending and its workflow item is not due until then."""
        start_at = soon(SHORT_DELAY * 2)
        request = CreateRunRequest(
            run_id=new_run_id(), workflow=SLOT_WF, args=b"", start_at=start_at
        )
        result = await world.create_run(request)
        assert result.run is not None and result.run.status == RunStatus.PENDING
        early = await _woken(world)
        # judged by the world's clock after the lease: a loaded machine may reach
        # the lease only after start_at, when the item is rightly due
        if world.now() < start_at:
            assert early == set(), "the item was due before start_at"
        with anyio.fail_after(10):
            while not (found := await _woken(world)):
                await anyio.sleep(0.05)
        assert found == {request.run_id}

    @pytest.mark.anyio
    async def test_concurrent_starts_never_exceed_the_limit(
        self, world_factory: WorldFactory
    ) -> None:
        """Many callers over several connections start into one pair and close holders
        at the same time: holders never exceed the limit, and every run ends up served."""
        limit, starts = 3, 24
        async with open_worlds(world_factory, 4) as opened:
            created: list[str] = []
            samples: list[int] = []

            async def starter(index: int) -> None:
                created.append(await _limited(opened[index % 4], "contended", limit))

            async def sampler() -> None:
                for _ in range(30):
                    rows = await opened[0].list_slots("tenant", "contended")
                    samples.append(sum(s.holding for s in rows))
                    await anyio.sleep(0.005)

            async with anyio.create_task_group() as group:
                group.start_soon(sampler)
                for index in range(starts):
                    group.start_soon(starter, index)
            served: set[str] = set()
            with anyio.fail_after(60):
                while len(served) < starts:
                    rows = await opened[1].list_slots("tenant", "contended")
                    holders = [s.run_id for s in rows if s.holding]
                    samples.append(len(holders))
                    assert len(holders) == min(limit, starts - len(served))
                    async with anyio.create_task_group() as group:
                        for n, holder in enumerate(holders):
                            world = opened[n % 4]
                            group.start_soon(_close, world, holder, RunCompleted(result=b""))
                    served |= set(holders)
            assert max(samples) <= limit
            assert sorted(served) == sorted(created)

    @pytest.mark.anyio
    async def test_waiters_are_promoted_first_in_first_out(self, world: World) -> None:
        """The order of promotion is the order of arrival, whatever the limit."""
        runs = [await _limited(world, "fifo", 2) for _ in range(8)]
        order: list[str] = []
        holders = runs[:2]
        while holders:
            await _close(world, holders[0], RunCompleted(result=b""))
            now_holding, _ = _split(await world.list_slots("tenant", "fifo"))
            order.extend(r for r in now_holding if r not in holders)
            holders = now_holding
        assert order == runs[2:]
