"""``WorkflowInstance`` driven directly by synthetic event logs, with no world.

Issue 12, item 6. The test plays the engine and the world: it appends events
to a list (numbering them as a world would), feeds them to the instance and
commits what the instance asks for. Step results and timer firings are events
the test writes itself, in the order it chooses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from workflow import create_hook, now, random, set_attribute, step, uuid4, workflow
from workflow._codec import decode_call, decode_result, encode_call, encode_result
from workflow.decorators import WorkflowDefinition
from workflow.engine._instance import Commit, WorkflowInstance
from workflow.errors import HookConflictError, NonDeterminismError, StepFailedError
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ErrorInfo,
    Event,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunCreated,
    RunFailed,
    RunStarted,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN_ID = "run_0000000000000000000000test"


@step
async def double(x: int) -> int:
    return 2 * x


@step
async def triple(x: int) -> int:
    return 3 * x


@step
async def cleanup() -> str:
    return "cleaned"


STEPS: dict[str, Callable[..., Any]] = {"double": lambda x: 2 * x, "triple": lambda x: 3 * x}


@workflow
async def mixed(x: int) -> dict[str, Any]:
    """A step, a timer, an attribute, a gather and the seeded values."""
    a = await double(x)
    await asyncio.sleep(60)
    await set_attribute("stage", "slept")
    b, c = await asyncio.gather(double(a), triple(a))
    return {"sum": a + b + c, "random": random(), "uuid": str(uuid4()), "now": now().isoformat()}


@workflow
async def mixed_diverging(x: int) -> dict[str, Any]:
    """``mixed`` after a careless edit: triple where double was."""
    a = await triple(x)
    await asyncio.sleep(60)
    return {"sum": a}


class Log:
    """A run's log as a world keeps it: events numbered from 1, stamped with a clock."""

    def __init__(self) -> None:
        self.events: list[EventKind] = []
        self.clock = T0

    def append(self, *events: EventKind) -> tuple[EventKind, ...]:
        stamped = []
        for event in events:
            stamped.append(msgspec.structs.replace(event, seq=len(self.events) + 1, at=self.clock))
            self.events.append(stamped[-1])
        return tuple(stamped)

    def commands(self) -> list[EventKind]:
        return [e for e in self.events if not isinstance(e, (RunCreated, StepCompleted))]


def start(definition: WorkflowDefinition[..., Any], *args: Any) -> tuple[WorkflowInstance, Log]:
    log = Log()
    log.append(RunCreated(workflow=definition.name, args=encode_call(args)))
    return WorkflowInstance(RUN_ID, definition, None), log


def turn(instance: WorkflowInstance, log: Log) -> Commit:
    """One workflow task, as the worker runs it: feed, advance, commit until unblocked."""
    instance.feed(log.events[instance.last_seq :])
    issued = Commit()
    while True:
        blocked = instance.advance()
        commit = instance.take_commit()
        instance.committed(log.append(*commit.events))
        issued.events += commit.events
        issued.schedule += commit.schedule
        if not blocked:
            return issued


def run_to_end(instance: WorkflowInstance, log: Log) -> None:
    """Turn until the run closes, doing the work the log leaves open as workers would."""
    for _ in range(50):
        turn(instance, log)
        if instance.finished:
            return
        done_steps = {e.step for e in log.events if isinstance(e, StepCompleted)}
        fired = {e.wait for e in log.events if isinstance(e, WaitCompleted)}
        for event in list(log.events):
            if isinstance(event, StepCreated) and event.step not in done_steps:
                (arg,) = _args(event.args)
                value = STEPS[event.name](arg)
                log.append(StepCompleted(step=event.step, attempt=1, result=encode_result(value)))
            elif isinstance(event, WaitCreated) and event.wait not in fired:
                log.clock = max(log.clock, event.until)
                log.append(WaitCompleted(wait=event.wait))
    raise AssertionError("the run did not close in 50 turns")


def _args(payload: bytes) -> tuple[Any, ...]:
    args, _ = decode_call(payload, lambda x: x)
    return args


def result_of(log: Log) -> Any:
    closing = log.events[-1]
    assert isinstance(closing, RunCompleted), closing
    return decode_result(closing.result, None)


# ------------------------------------------------------------------ first turn


def test_a_new_run_starts_and_issues_its_first_step() -> None:
    instance, log = start(mixed, 5)
    commit = turn(instance, log)
    assert [type(e) for e in commit.events] == [RunStarted, StepCreated]
    created = commit.events[1]
    assert isinstance(created, StepCreated)
    assert (created.step, created.name, _args(created.args)) == (1, "double", (5,))
    assert [(i.kind, i.name, i.number) for i in commit.schedule] == [("step", "double", 1)]
    assert not instance.finished


# ------------------------------------------------------------------ replay


def test_replaying_the_whole_log_issues_nothing_new() -> None:
    instance, log = start(mixed, 5)
    run_to_end(instance, log)
    assert result_of(log)["sum"] == 10 + 20 + 30

    again = WorkflowInstance(RUN_ID, mixed, None)
    again.feed(log.events)
    assert again.advance() is False
    assert again.take_commit().events == []
    assert again.failure is None
    assert again.finished


@pytest.mark.parametrize("cut", range(2, 12))
def test_replaying_a_prefix_issues_the_same_commands_as_the_original(cut: int) -> None:
    """Whatever the point a worker crashed at, a new worker continues identically."""
    instance, log = start(mixed, 5)
    run_to_end(instance, log)
    original = log.commands()

    prefix = Log()
    prefix.events = list(log.events[:cut])
    prefix.clock = prefix.events[-1].at
    resumed = WorkflowInstance(RUN_ID, mixed, None)
    run_to_end(resumed, prefix)
    assert [_strip(e) for e in prefix.commands()] == [_strip(e) for e in original]
    assert result_of(prefix) == result_of(log)


def _strip(event: EventKind) -> EventKind:
    return msgspec.structs.replace(event, seq=0, at=T0)


def test_a_diverging_log_raises_non_determinism_error() -> None:
    instance, log = start(mixed, 5)
    run_to_end(instance, log)

    changed = WorkflowInstance(RUN_ID, mixed_diverging, None)
    changed.feed(log.events)
    changed.advance()
    assert isinstance(changed.failure, NonDeterminismError)
    assert changed.failure.position == 0
    assert changed.failure.recorded == "step 'double'"
    assert changed.failure.issued == "step 'triple'"
    issued = changed.take_commit().events
    assert isinstance(issued[-1], RunFailed)
    assert "non-deterministic" in issued[-1].error.message
    assert not any(isinstance(e, (StepCreated, WaitCreated)) for e in issued)


class Stray(Event, tag="stray", frozen=True, kw_only=True):
    """An event kind the engine was not taught (mypy flags it; run time refuses it)."""


def test_an_event_of_no_known_kind_is_refused_loudly() -> None:
    instance, _ = start(mixed, 5)
    with pytest.raises(AssertionError):
        instance.feed([Stray(seq=2, at=T0)])  # type: ignore[list-item]


# ------------------------------------------------------------------ timers


@workflow
async def napper() -> str:
    before = now()
    await asyncio.sleep(90)
    return f"{before.isoformat()} {now().isoformat()}"


@workflow
async def sleeps_for_ever() -> None:
    await asyncio.sleep(1e12)


def test_a_timer_is_recorded_and_fires_only_on_its_event() -> None:
    instance, log = start(napper)
    commit = turn(instance, log)
    wait = commit.events[-1]
    assert isinstance(wait, WaitCreated)
    assert (wait.wait, wait.until) == (1, T0 + timedelta(seconds=90))
    (item,) = commit.schedule
    assert (item.kind, item.number, item.available_at) == ("timer", 1, wait.until)

    assert turn(instance, log).events == []  # nothing happened: still asleep
    log.clock = T0 + timedelta(seconds=95)  # the timer fired a little late
    log.append(WaitCompleted(wait=1))
    turn(instance, log)
    later = (T0 + timedelta(seconds=95)).isoformat()
    assert result_of(log) == f"{T0.isoformat()} {later}"


def test_a_timer_past_year_9000_is_clamped() -> None:
    instance, log = start(sleeps_for_ever)
    wait = turn(instance, log).events[-1]
    assert isinstance(wait, WaitCreated)
    assert wait.until == datetime(9000, 1, 1, tzinfo=UTC)


# ------------------------------------------------------------------ hooks


@workflow
async def listener() -> list[str]:
    hook = create_hook("tok")
    return [await hook.receive(), await hook.receive()]


def test_a_hook_blocks_for_its_claim_then_takes_payloads_in_order() -> None:
    instance, log = start(listener)
    instance.feed(log.events)
    assert instance.advance() is True  # the token must be claimed in the world first
    commit = instance.take_commit()
    assert [type(e) for e in commit.events] == [RunStarted, HookCreated]
    instance.committed(log.append(*commit.events))
    assert instance.advance() is False
    assert instance.take_commit().events == []

    log.append(HookReceived(hook=1, payload=encode_result("one")))
    log.append(HookReceived(hook=1, payload=encode_result("two")))
    turn(instance, log)
    assert result_of(log) == ["one", "two"]


def test_a_hook_payload_carried_over_waits_for_its_hook() -> None:
    """``HookReceived(hook=0)`` (moved by continue-as-new) reaches the hook made later."""
    instance, log = start(listener)
    log.append(HookReceived(hook=0, token="tok", payload=encode_result("early")))
    turn(instance, log)
    log.append(HookReceived(hook=1, payload=encode_result("late")))
    turn(instance, log)
    assert result_of(log) == ["early", "late"]


@workflow
async def conflicted() -> str:
    try:
        await create_hook("tok").receive()
    except HookConflictError as exc:
        return f"held by {exc.existing_run.id}"
    return "no conflict"


def test_a_recorded_hook_conflict_is_raised_in_the_body() -> None:
    instance, log = start(conflicted)
    log.append(RunStarted(), HookConflict(hook=1, token="tok", holder_run_id="run_other"))
    turn(instance, log)
    assert result_of(log) == "held by run_other"


@workflow
async def claims() -> str:
    try:
        await set_attribute("order", "o1", unique=True)
    except Exception as exc:
        return type(exc).__name__
    return "claimed"


def test_a_recorded_attribute_conflict_is_raised_in_the_body() -> None:
    instance, log = start(claims)
    log.append(RunStarted(), AttributeConflict(key="order", value="o1", holder_run_id="run_x"))
    turn(instance, log)
    assert result_of(log) == "AttributeConflictError"


# ------------------------------------------------------------------ gather


@workflow
async def fan_out() -> list[int]:
    return list(await asyncio.gather(double(1), double(2), triple(3)))


def test_gathered_steps_are_issued_in_call_order_and_answered_in_any_order() -> None:
    instance, log = start(fan_out)
    commit = turn(instance, log)
    created = [e for e in commit.events if isinstance(e, StepCreated)]
    assert [(e.step, e.name) for e in created] == [(1, "double"), (2, "double"), (3, "triple")]
    log.append(StepCompleted(step=3, attempt=1, result=encode_result(9)))
    assert turn(instance, log).events == []
    log.append(StepCompleted(step=1, attempt=1, result=encode_result(2)))
    log.append(StepCompleted(step=2, attempt=1, result=encode_result(4)))
    turn(instance, log)
    assert result_of(log) == [2, 4, 9]


def test_a_steps_own_records_do_not_reach_the_body() -> None:
    """StepStarted, StepRetrying and a step's attributes are the step's business."""
    instance, log = start(fan_out)
    turn(instance, log)
    error = ErrorInfo(type="ValueError", message="flaky")
    log.append(
        StepStarted(step=1, attempt=1),
        StepRetrying(step=1, attempt=1, error=error, retry_at=T0),
        StepStarted(step=1, attempt=2),
        AttributeSet(key="k", value="v", step=1, attempt=2),
    )
    assert turn(instance, log).events == []
    for number, value in ((1, 2), (2, 4), (3, 9)):
        log.append(StepCompleted(step=number, attempt=1, result=encode_result(value)))
    turn(instance, log)
    assert result_of(log) == [2, 4, 9]


@workflow
async def fragile() -> str:
    try:
        await double(1)
    except StepFailedError as exc:
        return f"{exc}"
    return "no failure"


def test_a_failed_step_raises_step_failed_error_in_the_body() -> None:
    instance, log = start(fragile)
    turn(instance, log)
    log.append(StepFailed(step=1, attempt=3, error=ErrorInfo(type="KeyError", message="gone")))
    turn(instance, log)
    assert "KeyError" in result_of(log)


# ------------------------------------------------------------------ cancellation


@workflow
async def careful() -> str:
    try:
        await double(1)
    except asyncio.CancelledError:
        await cleanup()
        raise
    return "finished"


def test_cancellation_reaches_the_body_once_and_cleanup_runs() -> None:
    instance, log = start(careful)
    turn(instance, log)
    deadline = T0 + timedelta(seconds=30)
    log.append(RunCancelRequested(reason="stop", deadline=deadline))
    commit = turn(instance, log)
    assert [(e.step, e.name) for e in commit.events if isinstance(e, StepCreated)] == [
        (2, "cleanup")
    ]
    log.append(RunCancelRequested(reason="again", deadline=deadline))  # not delivered twice
    assert turn(instance, log).events == []
    log.append(StepCompleted(step=2, attempt=1, result=encode_result("cleaned")))
    commit = turn(instance, log)
    assert [type(e) for e in commit.events] == [RunCancelled]
    closing = commit.events[0]
    assert isinstance(closing, RunCancelled)
    assert closing.reason == "stop"
    assert instance.finished
