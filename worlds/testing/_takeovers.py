"""Conformance: claim takeovers by start policies, fencing, continue-as-new, pruning."""

from __future__ import annotations

from datetime import timedelta

import pytest

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.testing._base import (
    STEP,
    WF,
    WORKER,
    ConformanceBase,
    create_run,
    lease_one,
    new_run_id,
    run_with_steps,
)
from worlds.types import (
    AttributeSet,
    CommitRequest,
    ConflictRule,
    CreateRunRequest,
    CreateRunResult,
    ErrorInfo,
    EventKind,
    ReuseRule,
    ReuseWindow,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunStarted,
    RunStatus,
    StartPolicy,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    utcnow,
)

__all__ = ["TakeoverConformance"]


async def _policy_start(
    world: World, value: str, conflict: ConflictRule, reuse: ReuseRule = "allow_duplicate"
) -> CreateRunResult:
    return await world.create_run(
        CreateRunRequest(
            run_id=new_run_id(),
            workflow=WF,
            args=b"",
            attributes={"order": value, "note": "n"},
            unique=frozenset({"order"}),
            policy=StartPolicy(key="order", conflict=conflict, reuse=reuse),
        )
    )


class TakeoverConformance(ConformanceBase):
    """Start policies move claims atomically, and a superseded run is fenced."""

    @pytest.mark.anyio
    async def test_terminate_existing_cancels_and_takes_over_in_one_step(
        self, world: World
    ) -> None:
        """The holder is cancelled, the new run holds the claim at generation + 1."""
        old = await create_run(world, attributes={"order": "o-1"}, unique={"order"})
        result = await _policy_start(world, "o-1", "terminate_existing")
        assert result.run is not None and result.conflict is None
        assert result.superseded_run_id == old.id
        record = await world.get_run(old.id)
        assert record is not None and record.status is RunStatus.CANCELLED
        reason = [e for e in await world.read_events(old.id) if isinstance(e, RunCancelled)]
        assert [e.reason for e in reason] == [f"superseded by run {result.run.id}"]
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and (claim.run_id, claim.generation) == (result.run.id, 2)
        assert [c.key for c in await world.run_claims(result.run.id)] == ["order"]
        assert await world.run_claims(old.id) == []

    @pytest.mark.anyio
    async def test_a_superseded_runs_other_claims_follow_their_windows(self, world: World) -> None:
        """Cancelled by ``terminate_existing``, the holder closes as any cancelled run:
        a claim whose window releases on cancel is free, one without a window is kept."""
        old_id = new_run_id()
        created = await world.create_run(
            CreateRunRequest(
                run_id=old_id,
                workflow=WF,
                args=b"",
                attributes={"order": "o-1", "ticket": "t-1", "coupon": "c-1"},
                unique=frozenset({"order", "ticket", "coupon"}),
                windows={"ticket": ReuseWindow(release_on=frozenset({RunStatus.CANCELLED}))},
            )
        )
        assert created.run is not None
        result = await _policy_start(world, "o-1", "terminate_existing")
        assert result.superseded_run_id == old_id
        assert await world.find_claim("ticket", "t-1") is None
        coupon = await world.find_claim("coupon", "c-1")
        assert coupon is not None and coupon.run_id == old_id

    @pytest.mark.anyio
    async def test_a_superseded_run_is_fenced(self, world: World) -> None:
        """After the takeover its commits write nothing but a discarded late result."""
        old, _, started = await run_with_steps(world, steps=1, lease_steps=True)
        (step_item,) = started.leased
        await world.commit(
            CommitRequest(
                run_id=old.id,
                worker_id=WORKER,
                events=(AttributeSet(key="order", value="o-2", unique=True),),
            )
        )
        result = await _policy_start(world, "o-2", "terminate_existing")
        assert result.superseded_run_id == old.id
        before = await world.read_events(old.id)
        refused = await world.commit(
            CommitRequest(
                run_id=old.id,
                worker_id=WORKER,
                events=(StepCreated(step=2, name=STEP, args=b""),),
            )
        )
        assert not refused.ok and refused.status is RunStatus.CANCELLED
        assert await world.renew_leases(WORKER, [step_item], 30.0) == [False]
        late = await world.commit(
            CommitRequest(
                run_id=old.id,
                worker_id=WORKER,
                lease=step_item,
                events=(StepCompleted(step=1, attempt=1, result=b"\xc0"),),
                discard=StepDiscarded(step=1, attempt=1, outcome="StepCompleted"),
            )
        )
        assert not late.ok
        after = await world.read_events(old.id)
        assert after[: len(before)] == before
        assert [type(e) for e in after[len(before) :]] == [StepDiscarded]

    @pytest.mark.parametrize(
        ("state", "conflict", "reuse", "takes_over"),
        [
            ("pending", "fail", "allow_duplicate", False),
            ("pending", "use_existing", "allow_duplicate", False),
            ("completed", "fail", "allow_duplicate", True),
            ("completed", "fail", "reject_duplicate", False),
            ("completed", "fail", "allow_duplicate_failed_only", False),
            ("cancelled", "fail", "allow_duplicate_failed_only", True),
            ("cancelled", "use_existing", "reject_duplicate", False),
        ],
    )
    @pytest.mark.anyio
    async def test_policy_decisions(
        self, world: World, state: str, conflict: ConflictRule, reuse: ReuseRule, takes_over: bool
    ) -> None:
        """Each rule of ``StartPolicy``; a refusal writes nothing and names the holder."""
        old = await create_run(world, attributes={"order": "o-3"}, unique={"order"})
        if state == "completed":
            await world.commit(
                CommitRequest(run_id=old.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
            )
        elif state == "cancelled":
            await world.cancel_run(old.id, None)
        result = await _policy_start(world, "o-3", conflict, reuse)
        claim = await world.find_claim("order", "o-3")
        assert claim is not None
        if takes_over:
            assert result.run is not None and result.superseded_run_id is None
            assert (claim.run_id, claim.generation) == (result.run.id, 2)
        else:
            assert result.run is None and result.conflict is not None
            assert result.conflict.holder_run_id == old.id
            assert result.conflict.holder_status == RunStatus(state)
            assert (claim.run_id, claim.generation) == (old.id, 1)
            page = await world.list_runs(RunQuery(attributes={"order": "o-3"}))
            assert [run.id for run in page.runs] == [old.id], "a refused start wrote a run"
        record = await world.get_run(old.id)
        assert record is not None and record.status == RunStatus(state)

    @pytest.mark.anyio
    async def test_continue_as_new_hands_claims_to_the_next_run(self, world: World) -> None:
        """``RunContinued`` closes the run and starts the next with its claims."""
        old = await create_run(world, attributes={"order": "o-4", "tenant": "t"}, unique={"order"})
        item = await lease_one(world, WF)
        next_id = new_run_id()
        result = await world.commit(
            CommitRequest(
                run_id=old.id,
                worker_id=WORKER,
                lease=item,
                events=(RunContinued(next_run_id=next_id, args=b"\x90"),),
            )
        )
        assert result.ok and result.status is RunStatus.CONTINUED
        successor = await world.get_run(next_id)
        assert successor is not None and successor.status is RunStatus.PENDING
        assert successor.attributes == {"order": "o-4", "tenant": "t"}
        (created,) = await world.read_events(next_id)
        assert isinstance(created, RunCreated) and created.args == b"\x90"
        claim = await world.find_claim("order", "o-4")
        assert claim is not None and (claim.run_id, claim.generation) == (next_id, 2)
        assert (await lease_one(world, WF)).run_id == next_id

    @pytest.mark.anyio
    async def test_prune_releases_claims_but_keeps_generations(self, world: World) -> None:
        """Pruned runs are gone; their pairs are free and re-claimed at a higher generation."""
        old = await create_run(world, attributes={"order": "o-5"}, unique={"order"})
        keep = await create_run(world, attributes={"order": "o-6"}, unique={"order"})
        await world.cancel_run(old.id, None)
        assert await world.prune_runs(utcnow() - timedelta(hours=1)) == []
        pruned = await world.prune_runs(utcnow() + timedelta(seconds=1), release_claims=True)
        assert pruned == [old.id]
        assert await world.get_run(old.id) is None
        assert await world.read_events(old.id) == []
        assert await world.find_claim("order", "o-5") is None
        assert (await world.get_run(keep.id)) is not None  # open runs are never pruned
        again = await create_run(world, attributes={"order": "o-5"}, unique={"order"})
        claim = await world.find_claim("order", "o-5")
        assert claim is not None and (claim.run_id, claim.generation) == (again.id, 2)

    @pytest.mark.parametrize(
        ("state", "conflict", "reuse", "takes_over"),
        [
            # holder's state, conflict rule, reuse rule, whether the new run takes the claim
            ("running", "fail", "allow_duplicate", False),
            ("running", "use_existing", "allow_duplicate", False),
            ("running", "terminate_existing", "reject_duplicate", True),
            ("completed", "fail", "allow_duplicate", True),
            ("completed", "use_existing", "reject_duplicate", False),
            ("completed", "fail", "allow_duplicate_failed_only", False),
            ("failed", "fail", "allow_duplicate_failed_only", True),
            ("cancelled", "terminate_existing", "allow_duplicate_failed_only", True),
        ],
    )
    @pytest.mark.anyio
    async def test_a_start_policy_takes_a_claim_over_in_one_transaction(
        self, world: World, state: str, conflict: ConflictRule, reuse: ReuseRule, takes_over: bool
    ) -> None:
        """The policy table against a holder closed by its own commit: a refusal leaves the
        claim and writes no run; a takeover moves the claim one generation up."""
        holder = await create_run(world, attributes={"order": "o-1"}, unique=["order"])
        closing: dict[str, EventKind] = {
            "running": RunStarted(),
            "completed": RunCompleted(result=b""),
            "failed": RunFailed(error=ErrorInfo(type="E", message="m")),
            "cancelled": RunCancelled(),
        }
        await world.commit(CommitRequest(run_id=holder.id, worker_id="w", events=(closing[state],)))
        result = await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"order": "o-1", "other": 1},
                unique=frozenset({"order"}),
                policy=StartPolicy(key="order", conflict=conflict, reuse=reuse),
            )
        )
        claim = await world.find_claim("order", "o-1")
        before = await world.get_run(holder.id)
        assert claim is not None and before is not None
        if not takes_over:
            assert result.run is None and result.conflict is not None
            assert result.conflict.holder_run_id == holder.id
            assert result.conflict.holder_status == RunStatus(state)
            assert (claim.run_id, claim.generation) == (holder.id, 1)
            assert len((await world.list_runs(RunQuery())).runs) == 1
            return
        assert result.run is not None and result.conflict is None
        assert (claim.run_id, claim.generation) == (result.run.id, 2)
        superseded = holder.id if state == "running" else None
        assert result.superseded_run_id == superseded
        assert before.status == (RunStatus.CANCELLED if state == "running" else RunStatus(state))
        assert await world.lease("w", names={WF}, limit=10, lease_seconds=30) != []
