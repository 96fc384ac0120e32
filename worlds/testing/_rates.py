"""Conformance of rate limits (tokens at start and in workflows) and waiting priority."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

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
    CreateRunResult,
    Limit,
    NewWorkItem,
    Rate,
    RateTokenRequested,
    RunCreated,
    RunStarted,
    SlotRequested,
    StepCreated,
    WorkItem,
)

__all__ = ["PriorityConformance", "RateLimitConformance"]

RATE_WF = "conformance-rates"
"""The workflow name of the kit's rate-limited runs (their items are leased by it)."""


async def _start(
    world: World,
    value: str,
    limit: int,
    per: float,
    on_full: str = "queue",
    *,
    start_at: datetime | None = None,
) -> CreateRunResult:
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=RATE_WF,
        args=b"",
        attributes={"customer": value},
        rates={"customer": Rate(limit=limit, per=per, on_full=on_full)},  # type: ignore[arg-type]
        start_at=start_at,
    )
    result = await world.create_run(request)
    assert (result.run is None) != (result.conflict is None), f"odd result {result!r}"
    return result


async def _admitted(world: World, run_id: str) -> datetime:
    """When the run's token lets it start: ``RunCreated.start_at``, else its creation."""
    created = (await world.read_events(run_id))[0]
    assert isinstance(created, RunCreated)
    return created.start_at or created.at


def most_in_a_window(times: Sequence[datetime], per: float) -> int:
    """The most of ``times`` any half-open window ``(t - per, t]`` holds."""
    span = timedelta(seconds=per)
    return max((sum(1 for o in times if t - span < o <= t) for t in times), default=0)


async def _late_worker(world: World, run_ids: Sequence[str]) -> dict[str, RunStarted]:
    """A worker that comes late: once every run of ``run_ids`` is due, it leases them
    all at once and commits each one's first task (``RunStarted`` and a step) in a
    burst; the stored ``RunStarted`` of each."""
    wanted, items = set(run_ids), dict[str, WorkItem]()
    with anyio.fail_after(60):  # a hang detector: each item is due within a second
        while set(items) != wanted:
            for item in await lease_all(world, {RATE_WF}):
                items[item.run_id] = item
            await anyio.sleep(0.05)
    started = {}
    for run_id, item in items.items():
        step = StepCreated(step=1, name="s", args=b"")
        request = CommitRequest(
            run_id=run_id,
            worker_id="probe",
            lease=item,
            events=(RunStarted(), step),
            schedule=(NewWorkItem(kind="step", name="s", number=1),),
        )
        result = await world.commit(request)
        assert result.ok, f"the first task of {run_id} was refused: {result!r}"
        first = result.events[0]
        assert isinstance(first, RunStarted) and result.events[1].at >= first.at
        started[run_id] = first
    return started


class RateLimitConformance(ConformanceBase):
    """``CreateRunRequest.rates`` and ``RateTokenRequested``: tokens per sliding window."""

    @pytest.mark.anyio
    async def test_tokens_are_handed_out_in_order_within_the_window(self, world: World) -> None:
        """The first ``limit`` starts are due now; the rest wait, pending and in order,
        for the times their window allows; other values are not limited."""
        runs = [await _start(world, "c-1", 2, 60.0) for _ in range(5)]
        ids = [r.run.id for r in runs if r.run is not None]
        times = [await _admitted(world, run_id) for run_id in ids]
        assert times == sorted(times)
        assert most_in_a_window(times, 60.0) <= 2
        assert times[2] - times[0] >= timedelta(seconds=60)
        assert {item.run_id for item in await lease_all(world, {RATE_WF})} == set(ids[:2])
        other = await _start(world, "c-2", 2, 60.0)
        assert other.run is not None
        assert {item.run_id for item in await lease_all(world, {RATE_WF})} == {other.run.id}

    @pytest.mark.anyio
    async def test_on_full_fail_refuses_with_retry_after(self, world: World) -> None:
        """A full ``on_full="fail"`` pair refuses: the conflict names the run whose token
        leaves the window first and says how long until it does; nothing is written."""
        first = await _start(world, "c-3", 1, 30.0, "fail")
        assert first.run is not None
        refused = await _start(world, "c-3", 1, 30.0, "fail")
        conflict = refused.conflict
        assert conflict is not None and conflict.key == "customer" and conflict.limit == 1
        assert conflict.holder_run_id == first.run.id
        assert conflict.retry_after is not None and 29.0 < conflict.retry_after <= 30.0
        assert len(await lease_all(world, {RATE_WF})) == 1

    @pytest.mark.anyio
    async def test_a_pair_has_one_rate_at_a_time(self, world: World) -> None:
        """A start asking another rate than the pair's recent tokens is a ``ValueError``."""
        await _start(world, "c-4", 2, 60.0)
        with pytest.raises(ValueError, match="one rate at a time"):
            await _start(world, "c-4", 2, 30.0)

    @pytest.mark.anyio
    async def test_a_delayed_start_takes_its_token_when_it_starts(self, world: World) -> None:
        """A token is taken at the start time (``start_at``), not at creation."""
        at = world.now() + timedelta(hours=1)
        delayed = await _start(world, "c-5", 1, 60.0, start_at=at)
        assert delayed.run is not None
        assert await _admitted(world, delayed.run.id) == at
        now = await _start(world, "c-5", 1, 60.0)
        assert now.run is not None
        assert await _admitted(world, now.run.id) == now.run.created_at

    @pytest.mark.anyio
    async def test_workflow_tokens_share_the_window(self, world: World) -> None:
        """``RateTokenRequested`` is settled in the commit with the token's time, in
        the same line as start-time tokens; another rate is refused, not raised."""
        run = (await _start(world, "c-6", 2, 60.0)).run
        assert run is not None
        (item,) = await lease_all(world, {RATE_WF})
        asked = RateTokenRequested(number=1, key="customer", value="c-6", limit=2, per=60.0)
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id="probe", lease=item, events=(asked, asked))
        )
        assert result.ok
        first, second = result.events
        assert isinstance(first, RateTokenRequested) and isinstance(second, RateTokenRequested)
        assert first.token_at is not None and second.token_at is not None
        assert first.token_at <= first.at + timedelta(seconds=1)
        assert second.token_at - run.created_at >= timedelta(seconds=60)
        odd = RateTokenRequested(number=3, key="customer", value="c-6", limit=5, per=60.0)
        result = await world.commit(CommitRequest(run_id=run.id, worker_id="x", events=(odd,)))
        (stored,) = result.events
        assert isinstance(stored, RateTokenRequested)
        assert stored.token_at is None and stored.refused is not None

    @pytest.mark.anyio
    async def test_concurrent_starts_never_overrun_a_window(
        self, world_factory: WorldFactory
    ) -> None:
        """Many callers over several connections start into one pair at once: no
        window of ``per`` holds more than ``limit`` admissions."""
        limit, per, starts = 3, 0.5, 24
        async with open_worlds(world_factory, 4) as opened:
            created: list[str] = []

            async def starter(index: int) -> None:
                result = await _start(opened[index % 4], "contended", limit, per)
                assert result.run is not None
                created.append(result.run.id)

            async with anyio.create_task_group() as group:
                for index in range(starts):
                    group.start_soon(starter, index)
            times = [await _admitted(opened[0], run_id) for run_id in created]
        assert len(times) == starts
        assert most_in_a_window(times, per) <= limit
        assert len(set(created)) == starts

    @pytest.mark.anyio
    async def test_a_late_worker_records_each_start_at_its_admission(self, world: World) -> None:
        """However late a worker begins rate-limited runs, each ``RunStarted`` (and the
        run's ``started_at``) is its admission time, so the recorded starts keep every
        window within the limit; a move (priority, ``set_delay``) moves it too."""
        limit, per = 2, 0.2
        runs = [await _start(world, "late", limit, per) for _ in range(4)]
        ids = [r.run.id for r in runs if r.run is not None]
        delayed = ids.pop()
        moved = await world.move_start(delayed, 0.5)  # its token goes to 0.5 s from now
        assert moved is not None
        first = CreateRunRequest(
            run_id=new_run_id(),
            workflow=RATE_WF,
            args=b"",
            attributes={"customer": "late"},
            rates={"customer": Rate(limit=limit, per=per)},
            priority=-1,  # passes the waiting runs of priority 0
        )
        passing = await world.create_run(first)
        assert passing.run is not None
        ids += [passing.run.id, delayed]
        admitted = {run_id: await _admitted(world, run_id) for run_id in ids}
        started = await _late_worker(world, ids)
        for run_id in ids:
            record = await world.get_run(run_id)
            assert record is not None
            assert started[run_id].at == admitted[run_id] == record.started_at
            assert record.admitted_at == admitted[run_id]
        times = [event.at for event in started.values()]
        assert most_in_a_window(times, per) <= limit
        assert admitted[delayed] >= moved.created_at + timedelta(seconds=0.5)

    @pytest.mark.anyio
    async def test_runs_without_a_rate_start_when_a_worker_begins_them(self, world: World) -> None:
        """A run with no ``RateLimited`` value has no admission time: its ``RunStarted``
        is dated by the commit that stores it."""
        (item,) = [await _plain(world)]
        result = await world.commit(
            CommitRequest(run_id=item.run_id, worker_id="probe", lease=item, events=(RunStarted(),))
        )
        (stored,) = result.events
        record = await world.get_run(item.run_id)
        assert record is not None and record.admitted_at is None
        assert stored.at == record.started_at and stored.at >= record.created_at


async def _plain(world: World) -> WorkItem:
    """A new run of the kit's rate workflow without any rate, its item leased."""
    request = CreateRunRequest(run_id=new_run_id(), workflow=RATE_WF, args=b"")
    created = await world.create_run(request)
    assert created.run is not None
    (item,) = [i for i in await lease_all(world, {RATE_WF}) if i.run_id == created.run.id]
    return item


class PriorityConformance(ConformanceBase):
    """``CreateRunRequest.priority`` and ``SlotRequested.priority``: lowest number first."""

    @pytest.mark.anyio
    async def test_waiters_are_promoted_by_priority_then_arrival(self, world: World) -> None:
        """A pair's waiters are listed and promoted lowest priority number first, first
        in first out within a number; start-time and ``hold`` waiters share the line."""
        ids = []
        for priority in (0, 4, -1, 4, -1, 0):
            request = CreateRunRequest(
                run_id=new_run_id(),
                workflow=RATE_WF,
                args=b"",
                attributes={"tenant": "p"},
                limits={"tenant": Limit(limit=1)},
                priority=priority,
            )
            result = await world.create_run(request)
            assert result.run is not None
            ids.append(request.run_id)
        holder, *waiting = ids
        order = [ids[2], ids[4], ids[5], ids[1], ids[3]]
        rows = await world.list_slots("tenant", "p")
        assert [s.run_id for s in rows if not s.holding] == order
        assert [s.priority for s in rows if not s.holding] == [-1, -1, 0, 4, 4]
        promoted = []
        current = holder
        for _ in order:
            assert await world.cancel_run(current, "next") is not None
            (now_holding,) = [s.run_id for s in await world.list_slots("tenant", "p") if s.holding]
            promoted.append(now_holding)
            current = now_holding
        assert promoted == order
        assert sorted(waiting) == sorted(order)

    @pytest.mark.anyio
    async def test_a_lower_number_passes_runs_waiting_for_tokens(self, world: World) -> None:
        """A start with a lower number takes the earliest waiting run's place; the runs
        it passes move back a place each, in their order, and keep the window."""
        ids = []
        for priority in (0, 0, 0, -1):
            request = CreateRunRequest(
                run_id=new_run_id(),
                workflow=RATE_WF,
                args=b"",
                attributes={"customer": "prio"},
                rates={"customer": Rate(limit=1, per=600.0)},
                priority=priority,
            )
            assert (await world.create_run(request)).run is not None
            ids.append(request.run_id)
        times = {run_id: await _admitted(world, run_id) for run_id in ids}
        order = sorted(ids, key=times.__getitem__)
        assert order == [ids[0], ids[3], ids[1], ids[2]]
        assert most_in_a_window(list(times.values()), 600.0) == 1

    @pytest.mark.anyio
    async def test_a_hold_with_a_lower_number_goes_first(self, world: World) -> None:
        """``SlotRequested.priority`` places a ``hold`` waiter ahead of higher numbers."""
        runs = []
        for _ in range(3):
            run_id = new_run_id()
            created = await world.create_run(
                CreateRunRequest(run_id=run_id, workflow=RATE_WF, args=b"")
            )
            assert created.run is not None
            runs.append(run_id)
        for run_id, priority in zip(runs, (0, 2, -3), strict=True):
            event = SlotRequested(hold=1, key="gpu", value="prio", limit=1, priority=priority)
            commit = CommitRequest(run_id=run_id, worker_id="holder", events=(event,))
            assert (await world.commit(commit)).ok
        rows = await world.list_slots("gpu", "prio")
        assert [s.run_id for s in rows] == [runs[0], runs[2], runs[1]]
