"""Conformance of reuse windows (``ttl``, ``release_on``) and claim tombstones."""

from __future__ import annotations

from datetime import timedelta

import anyio
import msgspec
import pytest

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.testing._base import (
    SHORT_DELAY,
    WF,
    ConformanceBase,
    WorldFactory,
    lease_all,
    new_run_id,
    open_worlds,
)
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ClaimConflict,
    CommitRequest,
    CreateRunRequest,
    CreateRunResult,
    Debounce,
    ErrorInfo,
    EventKind,
    ReuseWindow,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunStatus,
    StartPolicy,
    utcnow,
)

__all__ = ["DebounceConformance", "ReuseConformance"]


async def _claim(
    world: World,
    value: str,
    window: ReuseWindow | None = None,
    policy: StartPolicy | None = None,
) -> CreateRunResult:
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=WF,
        args=b"",
        attributes={"order": value},
        unique=frozenset({"order"}),
        windows={} if window is None else {"order": window},
        policy=policy,
    )
    return await world.create_run(request)


async def _holder(world: World, value: str, window: ReuseWindow | None = None) -> str:
    result = await _claim(world, value, window)
    assert result.run is not None, f"the claim was refused: {result.conflict!r}"
    return result.run.id


async def _close(world: World, run_id: str, event: EventKind) -> None:
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="closer", events=(event,)))
    assert result.ok and result.status.is_closed, f"closing {run_id} failed: {result!r}"


_FAILED = RunFailed(error=ErrorInfo(type="E", message="boom"))


class ReuseConformance(ConformanceBase):
    """Claims that free themselves after their holder closed, and claims that outlive it."""

    @pytest.mark.anyio
    async def test_a_holder_setting_its_pair_again_keeps_the_window(self, world: World) -> None:
        """A run that sets its own unique pair again (``AttributeSet``, same value) keeps
        the claim as it was: its generation and its reuse window, so closing it still
        releases the pair (the window used to be dropped: the pair stayed held)."""
        window = ReuseWindow(release_on=frozenset({RunStatus.CANCELLED}))
        holder = await _holder(world, "o-again", window)
        again = AttributeSet(key="order", value="o-again", unique=True)
        set_again = await world.commit(CommitRequest(run_id=holder, worker_id="w", events=(again,)))
        assert set_again.ok
        (stored,) = set_again.events
        assert isinstance(stored, AttributeSet) and stored.generation == 1
        claim = await world.find_claim("order", "o-again")
        assert claim is not None and claim.release_on == window.release_on
        await world.cancel_run(holder, None)
        assert await world.find_claim("order", "o-again") is None

    @pytest.mark.anyio
    async def test_release_on_frees_the_pair_when_the_holder_ends_so(self, world: World) -> None:
        """A holder closing with a status in ``release_on`` releases the pair at once,
        keeping its generation; any other outcome keeps it held."""
        window = ReuseWindow(release_on=frozenset({RunStatus.FAILED, RunStatus.CANCELLED}))
        failed = await _holder(world, "o-1", window)
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.release_on == window.release_on
        await _close(world, failed, _FAILED)
        assert await world.find_claim("order", "o-1") is None
        assert await world.run_claims(failed) == []
        again = await _holder(world, "o-1", window)
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and (claim.run_id, claim.generation) == (again, 2)
        await _close(world, again, RunCompleted(result=b""))
        refused = await _claim(world, "o-1")
        assert refused.conflict is not None and refused.conflict.holder_run_id == again
        cancelled = await _holder(world, "o-2", window)
        await world.cancel_run(cancelled, "stop")
        assert await world.find_claim("order", "o-2") is None

    @pytest.mark.anyio
    async def test_a_ttl_claim_lapses_that_long_after_its_holder_closed(self, world: World) -> None:
        """With ``ttl`` the pair stays held while the holder is open and ``ttl`` seconds
        after it closed (``lapses_at``), then it is free, one generation up."""
        open_holder = await _holder(world, "o-0", ReuseWindow(ttl=0.05))
        await anyio.sleep(SHORT_DELAY)  # an open holder never lapses, however long
        refused = (await _claim(world, "o-0")).conflict
        assert refused is not None and refused.holder_run_id == open_holder
        ttl = 3.0  # long enough to check it is still held right after the close
        holder = await _holder(world, "o-1", ReuseWindow(ttl=ttl))
        await _close(world, holder, RunCompleted(result=b""))
        record = await world.get_run(holder)
        assert record is not None and record.closed_at is not None
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.ttl == ttl
        assert claim.lapses_at == record.closed_at + timedelta(seconds=ttl)
        conflict = (await _claim(world, "o-1")).conflict
        assert conflict is not None and conflict.holder_run_id == holder
        with anyio.fail_after(ttl + 10):
            while await world.find_claim("order", "o-1") is not None:
                await anyio.sleep(0.05)
        assert await world.run_claims(holder) == []
        again = await _holder(world, "o-1")
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and (claim.run_id, claim.generation) == (again, 2)

    @pytest.mark.anyio
    async def test_claims_set_in_commits_carry_their_window(self, world: World) -> None:
        """A unique ``AttributeSet`` with ``ttl``/``release_on`` gives the claim its window,
        for the run and for a step alike."""
        run = await _holder(world, "o-0")
        events = (
            AttributeSet(
                key="deploy", value="sha-1", unique=True, release_on=frozenset({RunStatus.FAILED})
            ),
            AttributeSet(key="charge", value="c-1", unique=True, ttl=0.0, step=1, attempt=1),
        )
        result = await world.commit(CommitRequest(run_id=run, worker_id="w", events=events))
        assert result.ok and all(isinstance(e, AttributeSet) for e in result.events)
        deploy = await world.find_claim("deploy", "sha-1")
        assert deploy is not None and deploy.release_on == frozenset({RunStatus.FAILED})
        charge = await world.find_claim("charge", "c-1")
        assert charge is not None and charge.ttl == 0.0 and charge.step == 1
        await _close(world, run, _FAILED)
        assert await world.find_claim("deploy", "sha-1") is None
        assert await world.find_claim("charge", "c-1") is None
        held = await world.find_claim("order", "o-0")
        assert held is not None and held.run_id == run

    @pytest.mark.anyio
    async def test_continue_as_new_keeps_the_window(self, world: World) -> None:
        """A claim moved by continue-as-new keeps its window; the last run's close applies it."""
        window = ReuseWindow(release_on=frozenset({RunStatus.FAILED}))
        first = await _holder(world, "o-1", window)
        next_id = new_run_id()
        continued = RunContinued(next_run_id=next_id, args=b"")
        result = await world.commit(CommitRequest(run_id=first, worker_id="w", events=(continued,)))
        assert result.ok
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.run_id == next_id and claim.release_on
        await _close(world, next_id, _FAILED)
        assert await world.find_claim("order", "o-1") is None

    @pytest.mark.anyio
    async def test_pruning_keeps_claims_as_tombstones(self, world: World) -> None:
        """By default a pruned run's claims stay: the pair is refused with a conflict that
        says the holder was pruned and how it ended; commits conflict too."""
        holder = await _holder(world, "o-1")
        events = (AttributeSet(key="payment", value="p-1", unique=True, step=2, attempt=1),)
        await world.commit(CommitRequest(run_id=holder, worker_id="w", events=events))
        await _close(world, holder, _FAILED)
        assert await world.prune_runs(utcnow() + timedelta(seconds=1)) == [holder]
        assert await world.get_run(holder) is None
        tombstone = await world.find_claim("order", "o-1")
        assert tombstone is not None
        assert (tombstone.run_id, tombstone.generation) == (holder, 1)
        assert tombstone.pruned_status == RunStatus.FAILED
        assert [c.key for c in await world.run_claims(holder)] == ["order", "payment"]
        refused = await _claim(world, "o-1")
        assert refused.run is None
        assert refused.conflict == ClaimConflict(
            key="order",
            value="o-1",
            holder_run_id=holder,
            holder_status=RunStatus.FAILED,
            holder_pruned=True,
        )
        other = await _holder(world, "o-2")
        events = (AttributeSet(key="payment", value="p-1", unique=True),)
        result = await world.commit(CommitRequest(run_id=other, worker_id="w", events=events))
        (conflict,) = result.events
        assert isinstance(conflict, AttributeConflict) and conflict.holder_run_id == holder

    @pytest.mark.anyio
    async def test_a_policy_sees_a_tombstone_as_its_closed_holder(self, world: World) -> None:
        """``reject_duplicate`` refuses a tombstoned pair; ``allow_duplicate_failed_only``
        takes it over only from a failed or cancelled holder, one generation up."""
        holder = await _holder(world, "o-1")
        await _close(world, holder, RunCompleted(result=b""))
        await world.prune_runs(utcnow() + timedelta(seconds=1))
        reject = StartPolicy(key="order", reuse="reject_duplicate")
        refused = await _claim(world, "o-1", policy=reject)
        assert refused.conflict is not None and refused.conflict.holder_pruned
        assert refused.conflict.holder_status == RunStatus.COMPLETED
        failed_only = StartPolicy(key="order", reuse="allow_duplicate_failed_only")
        assert (await _claim(world, "o-1", policy=failed_only)).conflict is not None
        taken = await _claim(world, "o-1", policy=StartPolicy(key="order"))
        assert taken.run is not None and taken.superseded_run_id is None
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and (claim.run_id, claim.generation, claim.pruned_status) == (
            taken.run.id,
            2,
            None,
        )

    @pytest.mark.anyio
    async def test_release_claims_frees_pruned_pairs_and_lapsed_claims_go(
        self, world: World
    ) -> None:
        """``release_claims=True`` releases the pruned runs' pairs; a prune also releases
        every claim whose ttl lapsed, tombstone or not."""
        released = await _holder(world, "o-1")
        lapsing = await _holder(world, "o-2", ReuseWindow(ttl=0.0))
        for run_id in (released, lapsing):
            await _close(world, run_id, RunCompleted(result=b""))
        assert sorted(
            await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True)
        ) == sorted([released, lapsing])
        for value in ("o-1", "o-2"):
            assert await world.find_claim("order", value) is None
            again = await _holder(world, value)
            claim = await world.find_claim("order", value)
            assert claim is not None and (claim.run_id, claim.generation) == (again, 2)
        kept = await _holder(world, "o-3", ReuseWindow(ttl=3600.0))
        await _close(world, kept, RunCompleted(result=b""))
        await world.prune_runs(utcnow() + timedelta(seconds=1))
        tombstone = await world.find_claim("order", "o-3")
        assert tombstone is not None and tombstone.pruned_status == RunStatus.COMPLETED
        assert tombstone.lapses_at is not None

    @pytest.mark.anyio
    async def test_a_later_release_prune_frees_the_tombstones_kept_before(
        self, world: World
    ) -> None:
        """Issue 33, item 16: ``release_claims=True`` also frees the tombstones of earlier
        prunes, even when it prunes no run; the pair is claimed again one generation up."""
        holder = await _holder(world, "o-1")
        await _close(world, holder, _FAILED)
        assert await world.prune_runs(utcnow() + timedelta(seconds=1)) == [holder]
        assert (await _claim(world, "o-1")).conflict is not None
        assert await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True) == []
        assert await world.find_claim("order", "o-1") is None
        again = await _holder(world, "o-1")
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and (claim.run_id, claim.generation) == (again, 2)
        # a release prune leaves an open holder's claim alone
        assert await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True) == []
        assert (await world.find_claim("order", "o-1")) == claim

    @pytest.mark.anyio
    async def test_release_claim_frees_a_closed_or_pruned_holders_pair_only(
        self, world: World
    ) -> None:
        """Issue 33, item 16: ``release_claim`` frees a tombstone or a closed holder's
        claim (answering the claim as it was), refuses an open holder's (a conflict naming
        it, the claim kept) and answers ``None`` for a free pair."""
        pruned = await _holder(world, "o-1")
        closed = await _holder(world, "o-2")
        running = await _holder(world, "o-3")
        await _close(world, pruned, _FAILED)
        await _close(world, closed, RunCompleted(result=b""))
        assert await world.prune_runs(utcnow() + timedelta(seconds=1), limit=1) == [pruned]
        tombstone = await world.release_claim("order", "o-1")
        assert tombstone is not None and not isinstance(tombstone, ClaimConflict)
        assert (tombstone.key, tombstone.value, tombstone.run_id, tombstone.generation) == (
            "order",
            "o-1",
            pruned,
            1,
        )
        assert tombstone.pruned_status == RunStatus.FAILED
        released = await world.release_claim("order", "o-2")
        assert released is not None and not isinstance(released, ClaimConflict)
        assert (released.run_id, released.pruned_status) == (closed, None)
        assert await world.run_claims(closed) == []
        refused = await world.release_claim("order", "o-3")
        assert refused == ClaimConflict(
            key="order", value="o-3", holder_run_id=running, holder_status=RunStatus.PENDING
        )
        assert [c.run_id for c in await world.run_claims(running)] == [running]
        for value in ("o-1", "o-2", "never"):
            assert await world.find_claim("order", value) is None
            assert await world.release_claim("order", value) is None
        for value in ("o-1", "o-2"):
            again = await _holder(world, value)
            claim = await world.find_claim("order", value)
            assert claim is not None and (claim.run_id, claim.generation) == (again, 2)


def _debounced(value: str, args: bytes, delay: float = 30.0) -> CreateRunRequest:
    return CreateRunRequest(
        run_id=new_run_id(),
        workflow=WF,
        args=args,
        attributes={"user": value},
        unique=frozenset({"user"}),
        debounce=Debounce(key="user", delay=delay, max_delay=60.0),
    )


class DebounceConformance(ConformanceBase):
    """``CreateRunRequest.debounce``: update a pending holder, or take the pair over."""

    @pytest.mark.anyio
    async def test_a_pending_holder_gets_the_new_arguments(self, world: World) -> None:
        """The holder's ``RunCreated`` takes the newest arguments; no run is created."""
        first = await world.create_run(_debounced("u-1", b"\x91\x01"))
        assert first.run is not None and not first.debounced
        again = await world.create_run(_debounced("u-1", b"\x91\x02"))
        assert again.debounced and again.run is not None and again.run.id == first.run.id
        (created,) = await world.read_events(first.run.id)
        assert isinstance(created, RunCreated) and created.args == b"\x91\x02"
        assert created.at == first.run.created_at
        assert len((await world.list_runs(RunQuery())).runs) == 1
        assert await lease_all(world, {WF}) == []  # its start moved 30 s on

    @pytest.mark.anyio
    async def test_a_leased_holder_keeps_running_and_a_new_run_takes_the_pair(
        self, world: World
    ) -> None:
        """Once a worker had the holder, a debounced start creates a run holding the pair."""
        first = await world.create_run(_debounced("u-2", b"\x90", delay=0.0))
        assert first.run is not None
        (item,) = await lease_all(world, {WF})
        assert item.run_id == first.run.id
        second = await world.create_run(_debounced("u-2", b"\x90"))
        assert second.run is not None and not second.debounced
        assert second.run.id != first.run.id
        claim = await world.find_claim("user", "u-2")
        assert claim is not None and (claim.run_id, claim.generation) == (second.run.id, 2)
        record = await world.get_run(first.run.id)
        assert record is not None and record.status == RunStatus.PENDING

    @pytest.mark.anyio
    async def test_a_debounced_start_takes_a_pair_whose_claim_lapsed(self, world: World) -> None:
        """A pair held by a closed holder whose ``ttl`` ran out is free: a debounced start
        claims it, one generation up (PostgreSQL used to retry until it gave up)."""
        request = msgspec.structs.replace(
            _debounced("u-4", b"\x90"), windows={"user": ReuseWindow(ttl=SHORT_DELAY)}
        )
        first = await world.create_run(request)
        assert first.run is not None
        await _close(world, first.run.id, RunCompleted(result=b""))
        await anyio.sleep(SHORT_DELAY * 2)
        second = await world.create_run(_debounced("u-4", b"\x91"))
        assert second.run is not None and not second.debounced
        claim = await world.find_claim("user", "u-4")
        assert claim is not None and (claim.run_id, claim.generation) == (second.run.id, 2)

    @pytest.mark.anyio
    async def test_concurrent_debounces_leave_one_pending_run(
        self, world_factory: WorldFactory
    ) -> None:
        """Many callers over several connections debounce one pair: one run, last args win."""
        async with open_worlds(world_factory, 4) as opened:
            results: list[CreateRunResult] = []

            async def call(n: int) -> None:
                request = _debounced("u-3", bytes([0x91, n]))
                results.append(await opened[n % 4].create_run(request))

            async with anyio.create_task_group() as group:
                for n in range(16):
                    group.start_soon(call, n)
            ids = {result.run.id for result in results if result.run is not None}
            assert len(ids) == 1 and sum(not r.debounced for r in results) == 1
            page = await opened[0].list_runs(RunQuery(attributes={"user": "u-3"}))
            assert [run.id for run in page.runs] == list(ids)
