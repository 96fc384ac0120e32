"""Conformance of a run's life: ``create_run``, ``commit`` and ``cancel_run``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from worlds.protocol import PROTOCOL_VERSION, World
from worlds.testing._base import (
    STEP,
    TIMER,
    WF,
    WORKER,
    ConformanceBase,
    assert_dense,
    assert_utc,
    create_run,
    lease_all,
    lease_one,
    new_run_id,
    run_with_steps,
    soon,
)
from worlds.types import (
    EPOCH,
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    CommitRequest,
    CreateRunRequest,
    ErrorInfo,
    EventKind,
    FirstTask,
    HookConflict,
    HookCreated,
    HookReceived,
    NewWorkItem,
    RunCancelled,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStarted,
    RunStatus,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
    utcnow,
)

__all__ = ["RunsConformance"]

_CLOSINGS = [
    pytest.param(RunCompleted(result=b"\xa2ok"), RunStatus.COMPLETED, id="completed"),
    pytest.param(
        RunFailed(error=ErrorInfo(type="ValueError", message="boom", traceback="tb")),
        RunStatus.FAILED,
        id="failed",
    ),
    pytest.param(
        RunCancelled(reason="stopped by the workflow"), RunStatus.CANCELLED, id="cancelled"
    ),
]


def _bare(event: EventKind) -> EventKind:
    """``event`` without the fields the world assigns."""
    return msgspec.structs.replace(event, seq=0, at=EPOCH)


class RunsConformance(ConformanceBase):
    """``create_run``, ``commit`` and ``cancel_run``: runs, their logs and statuses."""

    @pytest.mark.anyio
    async def test_world_speaks_the_protocol(self, world: World) -> None:
        """The world satisfies the protocol and declares the version it implements."""
        assert isinstance(world, World)
        assert world.protocol_version == PROTOCOL_VERSION
        assert isinstance(world.url, str) and world.url
        assert isinstance(world.gathers_writes, bool)

    @pytest.mark.anyio
    async def test_a_setting_is_written_once_and_the_first_value_stays(self, world: World) -> None:
        """``setting`` reads ``None`` until a value is given; a later value is not
        recorded, and each key is its own."""
        assert await world.setting("codec") is None
        assert await world.setting("codec", "fernet-v1") == "fernet-v1"
        assert await world.setting("codec", "other") == "fernet-v1"
        assert await world.setting("codec") == "fernet-v1"
        assert await world.setting("another") is None

    @pytest.mark.anyio
    async def test_create_run_is_pending_with_run_created_as_seq_1(self, world: World) -> None:
        """A new run is pending, and its log is one ``RunCreated`` with seq 1."""
        attributes: dict[str, AttributeValue] = {"customer": "c-9", "tier": 3}
        run = await create_run(world, workflow="orders", attributes=attributes, args=b"\x91\x01")
        assert run.status == RunStatus.PENDING
        assert run.workflow == "orders"
        assert run.attributes == attributes
        assert run.last_seq == 1
        assert (run.started_at, run.closed_at, run.result, run.error) == (None, None, None, None)
        assert_utc(run.created_at)
        assert abs(run.created_at - utcnow()) < timedelta(minutes=5)
        assert await world.get_run(run.id) == run
        log = await world.read_events(run.id)
        assert len(log) == 1
        created = log[0]
        assert isinstance(created, RunCreated)
        assert (created.seq, created.workflow, created.args) == (1, "orders", b"\x91\x01")
        assert created.attributes == attributes
        assert_utc(created.at)

    @pytest.mark.anyio
    async def test_create_run_enqueues_a_leasable_workflow_item(self, world: World) -> None:
        """``create_run`` enqueues one workflow item, named after the workflow."""
        run = await create_run(world, workflow="orders")
        item = await lease_one(world, "orders")
        assert (item.run_id, item.kind, item.name) == (run.id, "workflow", "orders")
        assert item.lease_expires_at > utcnow()
        assert_utc(item.lease_expires_at)
        assert await lease_all(world, {"orders"}) == [], "a leased item was leased twice"
        assert len(await world.read_events(run.id)) == 1, "leasing a workflow item wrote events"

    @pytest.mark.anyio
    async def test_attribute_values_keep_their_types(self, world: World) -> None:
        """Every attribute value type round-trips with its type and value."""
        attributes: dict[str, AttributeValue] = {
            "text": "naïve ✓",
            "int": -7,
            "big": 2**53 + 1,
            "float": 2.5,
            "yes": True,
            "no": False,
            "nothing": None,
            "when": datetime(2024, 5, 17, 12, 30, 15, 123456, tzinfo=UTC),
        }
        run = await create_run(world, attributes=attributes)
        stored = await world.get_run(run.id)
        assert stored is not None
        for record in (run, stored):
            assert record.attributes == attributes
            for key, value in attributes.items():
                assert type(record.attributes[key]) is type(value), f"{key}: type changed"

    @pytest.mark.anyio
    async def test_duplicate_run_id_raises_value_error_and_writes_nothing(
        self, world: World
    ) -> None:
        """Creating a run id twice raises ``ValueError``; the first run is untouched."""
        run = await create_run(world, workflow="first", attributes={"a": 1})
        again = CreateRunRequest(
            run_id=run.id,
            workflow="second",
            args=b"",
            attributes={"a": 2, "fresh": "f-1"},
            unique=frozenset({"fresh"}),
        )
        with pytest.raises(ValueError):
            await world.create_run(again)
        assert await world.get_run(run.id) == run
        assert len(await world.read_events(run.id)) == 1
        assert await world.find_claim("fresh", "f-1") is None, "the refused run's claim was kept"
        assert len(await lease_all(world, {"first", "second"})) == 1

    @pytest.mark.anyio
    @pytest.mark.parametrize("attributes", [{}, {"a": 2}], ids=["bare", "with-attributes"])
    async def test_a_duplicate_run_id_with_its_first_task_writes_nothing(
        self, world: World, attributes: dict[str, AttributeValue]
    ) -> None:
        """``create_run`` with ``first`` on a taken run id raises ``ValueError`` and
        writes nothing: not the task's events, not its leased step, not the run."""
        run = await create_run(world, workflow="first", attributes={"a": 1})
        first = FirstTask(
            events=(RunStarted(), StepCreated(step=1, name=STEP, args=b"")),
            schedule=(NewWorkItem(kind="step", name=STEP, number=1, lease=True),),
            at=world.now(),
        )
        again = CreateRunRequest(
            run_id=run.id,
            workflow="second",
            args=b"",
            attributes=attributes,
            lease_to=WORKER,
            first=first,
        )
        with pytest.raises(ValueError, match="already exists"):
            await world.create_run(again)
        assert await world.get_run(run.id) == run
        assert len(await world.read_events(run.id)) == 1
        assert await lease_all(world, {STEP}) == []
        assert len(await lease_all(world, {"first", "second"})) == 1

    @pytest.mark.anyio
    async def test_commit_appends_events_with_dense_seq(self, world: World) -> None:
        """Commits number events densely per run and return them with seq and time."""
        run = await create_run(world)
        other = await create_run(world, workflow="other")
        item = await lease_one(world, WF, worker=WORKER)
        first = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(
                    RunStarted(),
                    StepCreated(step=1, name="a", args=b"1"),
                    StepCreated(step=2, name="b", args=b"2"),
                ),
                ack=False,
            )
        )
        assert first.ok and not first.lease_lost
        assert first.status == RunStatus.RUNNING
        assert [event.seq for event in first.events] == [2, 3, 4]
        assert [type(event) for event in first.events] == [RunStarted, StepCreated, StepCreated]
        second = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id=WORKER, events=(WaitCreated(wait=1, until=soon(60)),)
            )
        )
        assert [event.seq for event in second.events] == [5]
        log = await world.read_events(run.id)
        assert_dense(log)
        assert log[1:] == [*first.events, *second.events]
        assert [event.seq for event in await world.read_events(run.id, after_seq=3)] == [4, 5]
        assert await world.read_events(run.id, after_seq=5) == []
        record = await world.get_run(run.id)
        assert record is not None and record.last_seq == 5
        assert [event.seq for event in await world.read_events(other.id)] == [1], "logs are per run"

    @pytest.mark.anyio
    async def test_every_event_kind_round_trips(self, world: World) -> None:
        """Each event kind is stored and read back field for field."""
        run = await create_run(world)
        error = ErrorInfo(type="KeyError", message="'x'", traceback=None)
        when = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
        events: list[EventKind] = [
            RunStarted(),
            StepCreated(step=1, name="charge", args=b"\x00\xff"),
            StepStarted(step=1, attempt=1),
            StepRetrying(step=1, attempt=1, error=error, retry_at=when),
            StepCompleted(step=1, attempt=2, result=b"\xc0"),
            StepFailed(step=2, attempt=3, error=error),
            AttributeSet(key="note", value="hi"),
            AttributeSet(key="when", value=when, step=1, attempt=2),
            AttributeConflict(key="k", value=7, holder_run_id="someone"),
            WaitCreated(wait=1, until=when),
            WaitCompleted(wait=1),
            HookCreated(hook=1, token="tok", attributes={"a": 1.5, "b": None}),
            HookReceived(hook=1, payload=b"payload"),
            HookConflict(hook=2, token="tok", holder_run_id="someone"),
            StepDiscarded(step=3, attempt=1, outcome="completed"),
            RunFailed(error=ErrorInfo(type="E", message="m", traceback="t")),
        ]
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=tuple(events))
        )
        assert result.ok
        log = await world.read_events(run.id)
        assert_dense(log)
        assert [_bare(event) for event in log[1:]] == events
        assert [_bare(event) for event in result.events] == events

    @pytest.mark.anyio
    async def test_commit_without_a_lease_is_accepted(self, world: World) -> None:
        """A commit that names no lease (say, a hook resumed from outside) is applied."""
        run = await create_run(world)
        result = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id="client", events=(HookReceived(hook=1, payload=b"x"),)
            )
        )
        assert result.ok and result.status == RunStatus.PENDING
        assert [event.seq for event in result.events] == [2]

    @pytest.mark.anyio
    async def test_run_started_marks_the_run_running(self, world: World) -> None:
        """``RunStarted`` moves a pending run to running and sets ``started_at``."""
        run, _, result = await run_with_steps(world, steps=0)
        assert result.status == RunStatus.RUNNING
        record = await world.get_run(run.id)
        assert record is not None
        assert record.status == RunStatus.RUNNING
        assert_utc(record.started_at)
        assert record.started_at is not None and record.started_at >= run.created_at
        assert record.closed_at is None

    @pytest.mark.anyio
    @pytest.mark.parametrize(("closing", "status"), _CLOSINGS)
    async def test_closing_events_close_the_run(
        self, world: World, closing: EventKind, status: RunStatus
    ) -> None:
        """``RunCompleted``/``RunFailed``/``RunCancelled`` close the run with its outcome."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=(closing,))
        )
        assert result.ok and result.status == status
        record = await world.get_run(run.id)
        assert record is not None and record.status == status
        assert_utc(record.closed_at)
        assert record.closed_at is not None and record.started_at is not None
        assert record.closed_at >= record.started_at
        expected_result = closing.result if isinstance(closing, RunCompleted) else None
        expected_error = closing.error if isinstance(closing, RunFailed) else None
        assert (record.result, record.error) == (expected_result, expected_error)
        assert record.last_seq == result.events[-1].seq == 3

    @pytest.mark.anyio
    async def test_attribute_set_updates_run_attributes_unless_step_scoped(
        self, world: World
    ) -> None:
        """Run-level ``AttributeSet`` changes the record; a step-scoped one only logs."""
        run = await create_run(world, attributes={"stage": "new", "keep": 1})
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                events=(
                    AttributeSet(key="stage", value="paid"),
                    AttributeSet(key="amount", value=12.5),
                    AttributeSet(key="from_step", value="x", step=1, attempt=1),
                    AttributeSet(key="keep", value=2, step=1, attempt=1),
                ),
            )
        )
        assert result.ok
        record = await world.get_run(run.id)
        assert record is not None
        assert record.attributes == {"stage": "paid", "keep": 1, "amount": 12.5}
        scoped = [e for e in await world.read_events(run.id) if isinstance(e, AttributeSet)]
        assert [(e.key, e.step, e.attempt) for e in scoped] == [
            ("stage", None, None),
            ("amount", None, None),
            ("from_step", 1, 1),
            ("keep", 1, 1),
        ]

    @pytest.mark.anyio
    async def test_commit_with_a_lease_it_does_not_hold_writes_nothing(self, world: World) -> None:
        """Another worker's lease, or a token never issued, gives ``lease_lost``."""
        run = await create_run(world)
        item = await lease_one(world, WF, worker=WORKER)
        forged = msgspec.structs.replace(item, token=item.token + 1)
        for worker, lease in (("intruder", item), (WORKER, forged)):
            result = await world.commit(
                CommitRequest(
                    run_id=run.id,
                    worker_id=worker,
                    lease=lease,
                    events=(RunStarted(), AttributeSet(key="k", value="v", unique=True)),
                    schedule=(NewWorkItem(kind="step", name=STEP, number=1),),
                )
            )
            assert not result.ok and result.lease_lost, f"{worker} committed without the lease"
            assert (result.events, result.leased) == ((), ())
        assert len(await world.read_events(run.id)) == 1
        assert await world.get_run(run.id) == run
        assert await world.find_claim("k", "v") is None
        assert await lease_all(world, {STEP, WF}) == []
        assert await world.renew_leases(WORKER, [item], 30.0) == [True], "the holder lost its lease"

    @pytest.mark.anyio
    async def test_a_lease_on_another_run_is_not_a_lease_on_this_one(self, world: World) -> None:
        """Committing to run A with run B's item gives ``lease_lost``; B's item stays held."""
        a = await create_run(world, workflow="a")
        b = await create_run(world, workflow="b")
        b_item = await lease_one(world, "b")
        assert b_item.run_id == b.id
        result = await world.commit(
            CommitRequest(run_id=a.id, worker_id=WORKER, lease=b_item, events=(RunStarted(),))
        )
        assert not result.ok and result.lease_lost and result.events == ()
        assert await world.get_run(a.id) == a
        assert await world.renew_leases(WORKER, [b_item], 30.0) == [True], "B's item was acked"

    @pytest.mark.anyio
    async def test_commit_on_a_closed_run_writes_only_the_discard(self, world: World) -> None:
        """A closed run refuses commits; only a given ``discard`` is appended."""
        run, _, _ = await run_with_steps(world)
        step = await lease_one(world, STEP, worker="stepper")
        cancelled = await world.cancel_run(run.id, "user")
        assert cancelled is not None and cancelled.status == RunStatus.CANCELLED
        before = await world.read_events(run.id)
        late = StepCompleted(step=1, attempt=1, result=b"late")
        refused = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="stepper",
                lease=step,
                events=(late, AttributeSet(key="late", value=1)),
                schedule=(NewWorkItem(kind="workflow", name=WF),),
            )
        )
        assert not refused.ok and refused.status == RunStatus.CANCELLED
        assert (refused.events, refused.leased) == ((), ())
        assert await world.read_events(run.id) == before
        assert await world.get_run(run.id) == cancelled
        assert await lease_all(world, {WF, STEP}) == []
        discard = StepDiscarded(step=1, attempt=1, outcome="completed")
        result = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id="stepper", lease=step, events=(late,), discard=discard
            )
        )
        assert not result.ok and result.status == RunStatus.CANCELLED
        assert [_bare(event) for event in result.events] == [discard]
        after = await world.read_events(run.id)
        assert_dense(after)
        assert after == [*before, *result.events]
        record = await world.get_run(run.id)
        assert record is not None and record.status == RunStatus.CANCELLED
        assert record.last_seq == len(after)

    @pytest.mark.anyio
    async def test_discard_is_ignored_while_the_run_is_open(self, world: World) -> None:
        """On an open run ``discard`` is not appended; the events are."""
        run = await create_run(world)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                events=(RunStarted(),),
                discard=StepDiscarded(step=1, attempt=1, outcome="completed"),
            )
        )
        assert result.ok
        assert [type(event) for event in await world.read_events(run.id)] == [
            RunCreated,
            RunStarted,
        ]

    @pytest.mark.anyio
    async def test_closing_a_run_drops_its_work(self, world: World) -> None:
        """A commit that closes the run leaves no work of it, even work it schedules."""
        run, item, _ = await run_with_steps(world, steps=2, ack=False)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(RunCompleted(result=b""),),
                schedule=(
                    NewWorkItem(kind="step", name=STEP, number=3),
                    NewWorkItem(kind="timer", name=TIMER, number=1, available_at=utcnow()),
                    NewWorkItem(kind="workflow", name=WF),
                ),
            )
        )
        assert result.ok and result.status == RunStatus.COMPLETED
        assert result.leased == ()
        assert await lease_all(world, {WF, STEP, TIMER}) == []

    @pytest.mark.anyio
    async def test_cancel_run_closes_an_open_run_once(self, world: World) -> None:
        """``cancel_run`` appends ``RunCancelled(reason)``, drops work, and is idempotent."""
        run, _, _ = await run_with_steps(world)
        record = await world.cancel_run(run.id, "changed my mind")
        assert record is not None and record.id == run.id
        assert record.status == RunStatus.CANCELLED
        assert_utc(record.closed_at)
        assert await world.get_run(run.id) == record
        log = await world.read_events(run.id)
        assert_dense(log)
        assert isinstance(log[-1], RunCancelled) and log[-1].reason == "changed my mind"
        assert record.last_seq == log[-1].seq
        assert await lease_all(world, {WF, STEP}) == []
        assert await world.cancel_run(run.id, "again") == record
        assert await world.read_events(run.id) == log
        pending = await create_run(world)
        quiet = await world.cancel_run(pending.id, None)
        assert quiet is not None and quiet.status == RunStatus.CANCELLED
        last = (await world.read_events(pending.id))[-1]
        assert isinstance(last, RunCancelled) and last.reason is None

    @pytest.mark.anyio
    async def test_cancel_run_leaves_a_closed_run_unchanged(self, world: World) -> None:
        """Cancelling a completed run returns it as it is."""
        run, item, _ = await run_with_steps(world, steps=0, ack=False)
        done = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id=WORKER, lease=item, events=(RunCompleted(result=b"r"),)
            )
        )
        assert done.ok
        completed = await world.get_run(run.id)
        log = await world.read_events(run.id)
        record = await world.cancel_run(run.id, "too late")
        assert record == completed
        assert record is not None and record.status == RunStatus.COMPLETED and record.result == b"r"
        assert await world.read_events(run.id) == log

    @pytest.mark.anyio
    async def test_unknown_runs_are_none(self, world: World) -> None:
        """``get_run`` and ``cancel_run`` of a run that never existed give ``None``."""
        missing = new_run_id()
        assert await world.get_run(missing) is None
        assert await world.cancel_run(missing, None) is None
        assert await world.get_run(missing) is None
