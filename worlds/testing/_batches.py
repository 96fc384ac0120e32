"""Conformance of group commit: ``commit_many`` reports each request's outcome alone."""

from __future__ import annotations

import uuid

import anyio
import anyio.from_thread
import anyio.to_thread
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worlds.protocol import World
from worlds.testing._base import (
    STEP,
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    create_run,
    lease_one,
    poll_lease,
    run_with_steps,
)
from worlds.types import (
    AttributeSet,
    CommitRequest,
    CommitResult,
    RunCompleted,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepDiscarded,
    WorkItem,
)

__all__ = ["BatchCommitConformance"]


def _done(item: WorkItem, *, worker: str = WORKER) -> CommitRequest:
    """Step ``item`` completed, with a discard for a late result."""
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker,
        lease=item,
        events=(StepCompleted(step=item.number, attempt=item.attempt, result=b"r"),),
        discard=StepDiscarded(step=item.number, attempt=item.attempt, outcome="StepCompleted"),
    )


class BatchCommitConformance(ConformanceBase):
    """``commit_many``: one outcome per request, in order, neighbours unaffected."""

    @pytest.mark.anyio
    async def test_each_request_gets_its_own_result(self, world: World) -> None:
        """Runs closed and continued in one batch; each result is the one ``commit``
        would give, and each log is whole."""
        first = await create_run(world)
        second = await create_run(world)
        items = await world.lease(WORKER, names={WF}, limit=10, lease_seconds=30.0)
        by_run = {item.run_id: item for item in items}
        closing = CommitRequest(
            run_id=first.id,
            worker_id=WORKER,
            lease=by_run[first.id],
            events=(RunStarted(), RunCompleted(result=b"1")),
        )
        starting = CommitRequest(
            run_id=second.id, worker_id=WORKER, lease=by_run[second.id], events=(RunStarted(),)
        )
        outcomes = await world.commit_many([closing, starting])
        assert len(outcomes) == 2
        done, started = outcomes
        assert isinstance(done, CommitResult) and done.ok
        assert done.status is RunStatus.COMPLETED
        assert isinstance(started, CommitResult) and started.ok
        assert started.status is RunStatus.RUNNING
        for run in (first, second):
            assert_dense(await world.read_events(run.id))
        assert await world.commit_many([]) == []

    @pytest.mark.anyio
    async def test_a_bad_request_fails_alone(self, world: World) -> None:
        """A commit to an unknown run between two good ones: its outcome is the
        ``LookupError`` that ``commit`` raises, and both neighbours are applied."""
        run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
        one, two = sorted(started.leased, key=lambda item: item.number)
        unknown = CommitRequest(run_id="no-such-run", worker_id=WORKER, events=(RunStarted(),))
        outcomes = await world.commit_many([_done(one), unknown, _done(two)])
        assert isinstance(outcomes[1], LookupError)
        assert all(isinstance(o, CommitResult) and o.ok for o in (outcomes[0], outcomes[2]))
        log = await world.read_events(run.id)
        assert_dense(log)
        assert [e.step for e in log if isinstance(e, StepCompleted)] == [1, 2]

    @pytest.mark.anyio
    async def test_a_stale_lease_in_a_batch_is_fenced(self, world: World) -> None:
        """A zombie's result (its lease expired and was taken over) is refused and
        recorded as discarded; the good commit beside it is applied."""
        run, _, _ = await run_with_steps(world, steps=1)
        zombie = await lease_one(world, STEP, worker="zombie", lease_seconds=0.2)
        await anyio.sleep(0.3)
        (fresh,) = await poll_lease(world, {STEP}, worker="fresh")
        other = await create_run(world)
        other_item = await lease_one(world, WF)
        good = CommitRequest(
            run_id=other.id, worker_id=WORKER, lease=other_item, events=(RunStarted(),)
        )
        outcomes = await world.commit_many([_done(zombie, worker="zombie"), good])
        late, applied = outcomes
        assert isinstance(late, CommitResult) and not late.ok and late.lease_lost
        assert late.lease_holder == "fresh"
        assert isinstance(applied, CommitResult) and applied.ok
        log = await world.read_events(run.id)
        assert not any(isinstance(e, StepCompleted) for e in log)
        assert any(isinstance(e, StepDiscarded) for e in log)
        finished = await world.commit(_done(fresh, worker="fresh"))
        assert finished.ok, "the fresh lease holder commits after the fenced zombie"

    @pytest.mark.anyio
    async def test_requests_of_one_run_apply_in_order(self, world: World) -> None:
        """Two steps of one run finish together, each committed conditionally on the
        same horizon (the first after its step set an attribute): the first is
        applied, and the second, which did not see it, is stale."""
        run, _, started = await run_with_steps(world, steps=2, lease_steps=True)
        one, two = sorted(started.leased, key=lambda item: item.number)
        horizon = started.events[-1].seq
        mark = AttributeSet(key="phase", value="busy", step=1)
        noted = CommitRequest(run_id=run.id, worker_id=WORKER, lease=one, events=(mark,), ack=False)
        assert (await world.commit(noted)).ok
        batch = [
            msgspec.structs.replace(_done(item), discard=None, expect_seq=horizon)
            for item in (one, two)
        ]
        first, second = await world.commit_many(batch)
        assert isinstance(first, CommitResult) and first.ok and not first.stale
        assert isinstance(second, CommitResult) and second.stale and not second.ok
        log = await world.read_events(run.id)
        assert_dense(log)
        assert [e.step for e in log if isinstance(e, StepCompleted)] == [1]

    @pytest.mark.anyio
    async def test_a_batch_answers_each_request_as_it_would_alone(self, world: World) -> None:
        """Any mix of good requests, requests to unknown or closed runs and requests
        under a lease that is not held: each gets the outcome ``commit`` would give
        it, and only the good ones write."""
        kinds = st.lists(
            st.sampled_from(["good", "unknown", "closed", "lost"]), min_size=1, max_size=6
        )

        @settings(
            max_examples=20,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(kinds)
        def check(batch: list[str]) -> None:
            anyio.from_thread.run(_check_batch, world, batch)

        await anyio.to_thread.run_sync(check)


async def _check_batch(world: World, kinds: list[str]) -> None:
    """Build one request of each kind, send them as one batch, check every outcome."""
    workflow = f"batch-{uuid.uuid4().hex}"
    requests: list[CommitRequest] = []
    for kind in kinds:
        if kind == "unknown":
            requests.append(
                CommitRequest(run_id=f"no-{uuid.uuid4().hex}", worker_id=WORKER, events=())
            )
            continue
        run, _, started = await run_with_steps(world, workflow=workflow, lease_steps=True)
        (item,) = started.leased
        if kind == "closed":
            await world.commit(
                CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
            )
        if kind == "lost":
            item = msgspec.structs.replace(item, token=item.token + 1)
        requests.append(_done(item))
    outcomes = await world.commit_many(requests)
    assert len(outcomes) == len(requests)
    for kind, request, outcome in zip(kinds, requests, outcomes, strict=True):
        if kind == "unknown":
            assert isinstance(outcome, LookupError), outcome
            continue
        assert isinstance(outcome, CommitResult), outcome
        log = await world.read_events(request.run_id)
        assert_dense(log)
        completed = [e for e in log if isinstance(e, StepCompleted)]
        if kind == "good":
            assert outcome.ok and len(completed) == 1
        elif kind == "closed":
            assert not outcome.ok and outcome.status is RunStatus.COMPLETED and not completed
        else:
            assert not outcome.ok and outcome.lease_lost and not completed
