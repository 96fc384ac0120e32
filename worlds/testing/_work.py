"""Conformance of the work queue: leases, expiry, renewal, release, merging, timers, wait."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest

from worlds.protocol import RUNS_TOPIC, WORK_TOPIC, World, run_topic
from worlds.testing._base import (
    SHORT_DELAY,
    STEP,
    TIMER,
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    assert_dense,
    create_run,
    lease_all,
    lease_one,
    open_worlds,
    poll_lease,
    run_with_steps,
    soon,
)
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    NewWorkItem,
    RunCompleted,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepRetrying,
    StepStarted,
    WaitCreated,
    WorkItem,
    utcnow,
)

__all__ = ["WorkConformance"]


async def _starts(world: World, run_id: str) -> list[tuple[int, int]]:
    """``(step, attempt)`` of every ``StepStarted`` in the run's log, in log order."""
    return [
        (e.step, e.attempt) for e in await world.read_events(run_id) if isinstance(e, StepStarted)
    ]


async def _woken_after(world: World, topic: str, action: Callable[[], Awaitable[object]]) -> float:
    """How long a ``wait(topic, 10)`` lasts when ``action`` runs 0.2 s after it began."""
    elapsed = 0.0

    async def waiter() -> None:
        nonlocal elapsed
        began = anyio.current_time()
        await world.wait(topic, 10.0)
        elapsed = anyio.current_time() - began

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.2)
        await action()
    return elapsed


class WorkConformance(ConformanceBase):
    """``lease``, ``renew_leases``, ``release``, work scheduled by commits, and ``wait``."""

    @pytest.mark.anyio
    async def test_lease_honours_names(self, world: World) -> None:
        """Only items whose name is asked for are leased."""
        billing = await create_run(world, workflow="billing")
        shipping = await create_run(world, workflow="shipping")
        assert await world.lease(WORKER, names=set(), limit=10, lease_seconds=30.0) == []
        assert await lease_all(world, {"other"}) == []
        got = await lease_all(world, {"billing", "other"})
        assert [(item.run_id, item.name) for item in got] == [(billing.id, "billing")]
        rest = await lease_all(world, {"billing", "shipping"})
        assert [(item.run_id, item.name) for item in rest] == [(shipping.id, "shipping")]

    @pytest.mark.anyio
    async def test_lease_honours_limit(self, world: World) -> None:
        """At most ``limit`` items per call; every item is leased exactly once."""
        runs = {(await create_run(world)).id for _ in range(5)}
        first = await world.lease(WORKER, names={WF}, limit=2, lease_seconds=30.0)
        assert len(first) == 2
        second = await world.lease(WORKER, names={WF}, limit=10, lease_seconds=30.0)
        assert len(second) == 3
        assert {item.run_id for item in [*first, *second]} == runs
        assert await world.lease(WORKER, names={WF}, limit=10, lease_seconds=30.0) == []

    @pytest.mark.anyio
    async def test_items_not_yet_due_are_not_leased(self, world: World) -> None:
        """An item whose ``available_at`` is in the future is neither leased nor eagerly leased."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(
                    StepCreated(step=1, name=STEP, args=b""),
                    StepCreated(step=2, name=STEP, args=b""),
                ),
                schedule=(
                    NewWorkItem(
                        kind="step", name=STEP, number=1, available_at=soon(3600), lease=True
                    ),
                    NewWorkItem(kind="step", name=STEP, number=2, available_at=soon(-1)),
                ),
            )
        )
        assert result.ok and result.leased == ()
        assert [item.number for item in await lease_all(world, {STEP})] == [2]
        assert await _starts(world, run.id) == [(2, 1)]

    @pytest.mark.anyio
    async def test_timers_become_leasable_only_when_due(self, world: World) -> None:
        """A timer item is leased only after its ``available_at``, with no ``StepStarted``."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        until = soon(SHORT_DELAY)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(WaitCreated(wait=1, until=until),),
                schedule=(NewWorkItem(kind="timer", name=TIMER, number=1, available_at=until),),
            )
        )
        assert result.ok
        assert await lease_all(world, {TIMER}) == [], "a timer fired early"
        fired = await poll_lease(world, {TIMER})
        assert utcnow() >= until, "a timer fired early"
        assert [(t.run_id, t.kind, t.name, t.number) for t in fired] == [
            (run.id, "timer", TIMER, 1)
        ]
        assert await _starts(world, run.id) == []

    @pytest.mark.anyio
    async def test_a_retry_scheduled_for_later_is_the_next_attempt(self, world: World) -> None:
        """Acking a step while rescheduling it keeps the retry, due at its ``retry_at``."""
        run, _, _ = await run_with_steps(world)
        first = await lease_one(world, STEP, worker="stepper")
        assert (first.number, first.attempt, first.payload) == (1, 1, b"p1")
        retry_at = soon(SHORT_DELAY)
        error = ErrorInfo(type="TimeoutError", message="slow")
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="stepper",
                lease=first,
                events=(StepRetrying(step=1, attempt=1, error=error, retry_at=retry_at),),
                schedule=(
                    NewWorkItem(
                        kind="step",
                        name=STEP,
                        number=1,
                        attempt=2,
                        payload=first.payload,
                        available_at=retry_at,
                    ),
                ),
            )
        )
        assert result.ok
        assert await lease_all(world, {STEP}) == [], "the retry ran before its retry_at"
        (second,) = await poll_lease(world, {STEP}, worker="stepper")
        assert utcnow() >= retry_at
        assert (second.run_id, second.number, second.attempt, second.payload) == (
            run.id,
            1,
            2,
            b"p1",
        )
        assert await _starts(world, run.id) == [(1, 1), (1, 2)]

    @pytest.mark.anyio
    async def test_concurrent_leasers_never_share_an_item(
        self, world: World, world_factory: WorldFactory
    ) -> None:
        """Twenty leasers on five world objects: each item goes to exactly one of them."""
        runs = {(await create_run(world)).id for _ in range(10)}
        leased: list[tuple[str, WorkItem]] = []
        async with open_worlds(world_factory, 5) as worlds:

            async def lease(index: int) -> None:
                worker = f"leaser-{index}"
                got = await worlds[index % 5].lease(worker, names={WF}, limit=3, lease_seconds=30.0)
                leased.extend((worker, item) for item in got)

            async with anyio.create_task_group() as group:
                for index in range(20):
                    group.start_soon(lease, index)
            ids = [item.id for _, item in leased]
            assert len(ids) == len(set(ids)), "an item was leased to two workers at once"
            for worker, item in leased:
                assert await worlds[0].renew_leases(worker, [item], 30.0) == [True]
        rest = await lease_all(world, {WF})
        assert sorted(item.run_id for item in [*(i for _, i in leased), *rest]) == sorted(runs)

    @pytest.mark.anyio
    async def test_concurrent_leasers_start_each_step_once(
        self, world: World, world_factory: WorldFactory
    ) -> None:
        """Concurrent leasing of one run's steps appends one ``StepStarted`` per step, densely."""
        run, _, _ = await run_with_steps(world, steps=10)
        leased: list[WorkItem] = []
        async with open_worlds(world_factory, 5) as worlds:

            async def lease(index: int) -> None:
                world = worlds[index % 5]
                leased.extend(
                    await world.lease(f"s-{index}", names={STEP}, limit=2, lease_seconds=30.0)
                )

            async with anyio.create_task_group() as group:
                for index in range(20):
                    group.start_soon(lease, index)
        leased.extend(await lease_all(world, {STEP}))
        assert sorted(item.number for item in leased) == list(range(1, 11))
        log = await world.read_events(run.id)
        assert_dense(log)
        assert sorted(await _starts(world, run.id)) == [(n, 1) for n in range(1, 11)]

    @pytest.mark.anyio
    async def test_an_expired_lease_goes_to_another_worker_as_a_new_attempt(
        self, world: World
    ) -> None:
        """After expiry another worker leases the step: new token, next attempt, StepStarted."""
        run, _, _ = await run_with_steps(world)
        first = await lease_one(world, STEP, worker="w1", lease_seconds=SHORT_DELAY)
        assert first.attempt == 1
        assert await lease_all(world, {STEP}, worker="w2") == [], "a held lease was taken"
        (second,) = await poll_lease(world, {STEP}, worker="w2")
        assert (second.run_id, second.number) == (first.run_id, first.number)
        assert second.token != first.token
        assert second.attempt == 2
        assert await _starts(world, run.id) == [(1, 1), (1, 2)]
        stale = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="w1",
                lease=first,
                events=(StepCompleted(step=1, attempt=1, result=b"old"),),
            )
        )
        assert not stale.ok and stale.lease_lost and stale.events == ()
        assert await world.renew_leases("w1", [first], 30.0) == [False]
        assert await world.renew_leases("w2", [second], 30.0) == [True]
        fresh = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="w2",
                lease=second,
                events=(StepCompleted(step=1, attempt=2, result=b"new"),),
            )
        )
        assert fresh.ok
        done = [e for e in await world.read_events(run.id) if isinstance(e, StepCompleted)]
        assert [(e.attempt, e.result) for e in done] == [(2, b"new")]

    @pytest.mark.anyio
    async def test_a_zombies_refused_result_is_recorded_as_discarded(self, world: World) -> None:
        """A late step result under a lost lease, while the run is open, appends only
        its ``discard``; the retry of a commit that had landed appends nothing."""
        run, _, _ = await run_with_steps(world)
        first = await lease_one(world, STEP, worker="w1", lease_seconds=SHORT_DELAY)
        (second,) = await poll_lease(world, {STEP}, worker="w2")
        discard = StepDiscarded(step=1, attempt=1, outcome="StepCompleted")
        late = CommitRequest(
            run_id=run.id,
            worker_id="w1",
            lease=first,
            events=(StepCompleted(step=1, attempt=1, result=b"late"),),
            discard=discard,
        )
        refused = await world.commit(late)
        assert not refused.ok and refused.lease_lost
        assert refused.lease_holder == "w2", "a lost lease's result names who holds it now"
        (recorded,) = refused.events
        assert isinstance(recorded, StepDiscarded) and recorded.seq > 0
        assert (recorded.step, recorded.attempt, recorded.outcome) == (1, 1, "StepCompleted")
        done = StepCompleted(step=1, attempt=2, result=b"new")
        landed = CommitRequest(
            run_id=run.id,
            worker_id="w2",
            lease=second,
            events=(done,),
            discard=StepDiscarded(step=1, attempt=2, outcome="StepCompleted"),
        )
        assert (await world.commit(landed)).ok
        again = await world.commit(landed)  # its reply was lost, say, and it is retried
        assert not again.ok and again.lease_lost and again.events == ()
        assert again.lease_holder is None  # the item is done: nobody holds it
        logged = await world.read_events(run.id)
        assert [(e.step, e.attempt) for e in logged if isinstance(e, StepDiscarded)] == [(1, 1)]
        assert [e.attempt for e in logged if isinstance(e, StepCompleted)] == [2]
        assert_dense(logged)

    @pytest.mark.anyio
    async def test_a_stale_token_is_refused_even_for_the_same_worker(self, world: World) -> None:
        """A worker that re-leases an item after expiry cannot commit with its old token."""
        run = await create_run(world)
        old = await lease_one(world, WF, lease_seconds=SHORT_DELAY)
        (new,) = await poll_lease(world, {WF})
        assert new.token != old.token
        stale = await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=old))
        assert not stale.ok and stale.lease_lost
        assert await world.renew_leases(WORKER, [old, new], 30.0) == [False, True]
        assert (await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=new))).ok

    @pytest.mark.anyio
    async def test_renew_leases_keeps_items_held_until_the_run_closes(self, world: World) -> None:
        """Renewal outlives the first lease; it fails for other workers and cancelled runs."""
        await create_run(world)
        await create_run(world)
        items = await world.lease(WORKER, names={WF}, limit=10, lease_seconds=1.5)
        assert len(items) == 2
        assert await world.renew_leases(WORKER, [], 30.0) == []
        for _ in range(3):  # 1.8 s in all, past the first lease; 0.9 s to spare each time
            await anyio.sleep(0.6)
            assert await world.renew_leases(WORKER, items, 5.0) == [True, True]
        assert await lease_all(world, {WF}, worker="thief") == [], "a renewed lease expired"
        assert await world.renew_leases("thief", items, 30.0) == [False, False]
        assert await world.cancel_run(items[0].run_id, None) is not None
        assert await world.renew_leases(WORKER, items, 30.0) == [False, True]
        refused = await world.commit(
            CommitRequest(run_id=items[0].run_id, worker_id=WORKER, lease=items[0])
        )
        assert not refused.ok

    @pytest.mark.anyio
    async def test_release_makes_items_leasable_again(self, world: World) -> None:
        """Released items can be leased at once with a new token; others cannot release them."""
        run, _, _ = await run_with_steps(world)
        item = await lease_one(world, STEP)
        await world.release("intruder", [item])
        assert await lease_all(world, {STEP}, worker="w2") == [], "a non-holder released an item"
        await world.release(WORKER, [item])
        again = await lease_one(world, STEP, worker="w2")
        assert (again.run_id, again.number) == (run.id, item.number)
        assert again.token != item.token
        assert await world.renew_leases(WORKER, [item], 30.0) == [False]
        starts = await _starts(world, run.id)
        assert len(starts) == 2 and starts[-1] == (1, again.attempt)

    @pytest.mark.anyio
    async def test_waking_a_leased_workflow_item_sets_a_rewake(self, world: World) -> None:
        """A wake while the workflow item is leased survives the holder's ack, once."""
        run, wf_item, _ = await run_with_steps(world, ack=False)
        step = await lease_one(world, STEP, worker="stepper")
        done = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="stepper",
                lease=step,
                events=(StepCompleted(step=1, attempt=1, result=b""),),
                schedule=(NewWorkItem(kind="workflow", name=WF),),
            )
        )
        assert done.ok
        assert await lease_all(world, {WF}, worker="w2") == [], "a run got two workflow items"
        acked = await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=wf_item))
        assert acked.ok
        again = await lease_one(world, WF, worker="w2")
        assert again.run_id == run.id and again.token != wf_item.token
        assert (await world.commit(CommitRequest(run_id=run.id, worker_id="w2", lease=again))).ok
        assert await lease_all(world, {WF}) == [], "the ack left a workflow item without a wake"

    @pytest.mark.anyio
    async def test_a_pending_workflow_item_absorbs_new_wakes(self, world: World) -> None:
        """Waking a run whose workflow item is waiting does not add a second item."""
        run = await create_run(world)
        for _ in range(2):
            result = await world.commit(
                CommitRequest(
                    run_id=run.id,
                    worker_id="client",
                    schedule=(NewWorkItem(kind="workflow", name=WF),),
                )
            )
            assert result.ok
        assert [item.run_id for item in await lease_all(world, {WF})] == [run.id]

    @pytest.mark.anyio
    async def test_ack_deletes_the_item_and_no_ack_keeps_it(self, world: World) -> None:
        """``ack=False`` keeps the lease; ``ack=True`` finishes the item for good."""
        run = await create_run(world)
        item = await lease_one(world, WF)
        kept = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, ack=False)
        )
        assert kept.ok
        assert await lease_all(world, {WF}) == [], "ack=False gave the item away"
        assert await world.renew_leases(WORKER, [item], 30.0) == [True]
        acked = await world.commit(CommitRequest(run_id=run.id, worker_id=WORKER, lease=item))
        assert acked.ok
        assert await world.renew_leases(WORKER, [item], 30.0) == [False]
        assert await lease_all(world, {WF}) == [], "an acked item came back"

    @pytest.mark.anyio
    async def test_eager_lease_returns_the_item_and_starts_the_step(self, world: World) -> None:
        """``NewWorkItem(lease=True)`` comes back leased, with ``StepStarted`` appended."""
        run, _, result = await run_with_steps(world, steps=2, lease_steps=True)
        assert sorted((i.kind, i.name, i.number, i.attempt) for i in result.leased) == [
            ("step", STEP, 1, 1),
            ("step", STEP, 2, 1),
        ]
        assert {item.run_id for item in result.leased} == {run.id}
        assert sorted(item.payload for item in result.leased) == [b"p1", b"p2"]
        assert all(item.lease_expires_at > utcnow() for item in result.leased)
        assert await lease_all(world, {STEP}) == [], "an eagerly leased item was leased again"
        log = await world.read_events(run.id)
        assert_dense(log)
        for event in result.events:
            assert log[event.seq - 1] == event, "CommitResult.events disagree with the log"
        created = {e.step: e.seq for e in log if isinstance(e, StepCreated)}
        started = {e.step: e for e in log if isinstance(e, StepStarted)}
        assert sorted(started) == [1, 2]
        assert all(started[n].attempt == 1 and started[n].seq > created[n] for n in (1, 2))
        assert await world.renew_leases(WORKER, list(result.leased), 30.0) == [True, True]
        step = result.leased[0]
        finished = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=step,
                events=(StepCompleted(step=step.number, attempt=1, result=b""),),
            )
        )
        assert finished.ok

    # ------------------------------------------------------------------ wait

    @pytest.mark.anyio
    async def test_wait_returns_within_its_timeout(self, world: World) -> None:
        """A wait nobody signals still returns by its timeout."""
        began = anyio.current_time()
        await world.wait(run_topic("nobody"), 0.2)
        await world.wait(WORK_TOPIC, 0.2)
        assert anyio.current_time() - began < 3.0

    @pytest.mark.anyio
    async def test_wait_wakes_when_cancel_run_closes_the_run(self, world: World) -> None:
        """``cancel_run`` signals the run's topic."""
        run = await create_run(world)
        elapsed = await _woken_after(
            world, run_topic(run.id), lambda: world.cancel_run(run.id, None)
        )
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after the run closed"

    @pytest.mark.anyio
    async def test_wait_wakes_when_a_commit_closes_the_run(self, world: World) -> None:
        """A commit that completes the run signals the run's topic."""
        run = await create_run(world)
        closing = CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        elapsed = await _woken_after(world, run_topic(run.id), lambda: world.commit(closing))
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after the run closed"

    @pytest.mark.anyio
    async def test_wait_on_the_runs_topic_wakes_when_any_run_closes(self, world: World) -> None:
        """Every signal of a run's topic signals ``RUNS_TOPIC`` too: one subscription
        hears any run close (``Run.result``'s shared reader waits on it)."""
        run = await create_run(world)
        closing = CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        elapsed = await _woken_after(world, RUNS_TOPIC, lambda: world.commit(closing))
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after a run closed"
        other = await create_run(world)
        elapsed = await _woken_after(world, RUNS_TOPIC, lambda: world.cancel_run(other.id, None))
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after a run closed"

    @pytest.mark.anyio
    async def test_wait_wakes_when_create_run_enqueues_work(self, world: World) -> None:
        """Creating a run (which enqueues its workflow item) signals ``WORK_TOPIC``."""
        elapsed = await _woken_after(world, WORK_TOPIC, lambda: create_run(world))
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after work was enqueued"

    @pytest.mark.anyio
    async def test_wait_wakes_when_a_commit_enqueues_work(self, world: World) -> None:
        """A commit that schedules a step item signals ``WORK_TOPIC``."""
        run = await create_run(world)
        scheduling = CommitRequest(
            run_id=run.id,
            worker_id=WORKER,
            events=(StepCreated(step=1, name=STEP, args=b""),),
            schedule=(NewWorkItem(kind="step", name=STEP, number=1),),
        )
        elapsed = await _woken_after(world, WORK_TOPIC, lambda: world.commit(scheduling))
        assert elapsed < 5.0, f"waited {elapsed:.1f} s of 10 s after work was enqueued"
