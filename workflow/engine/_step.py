"""Running one step attempt: the step-side runtime and the outcome to commit."""

from __future__ import annotations

import contextvars
import functools
import random as _random
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

import anyio

from workflow import _observe, _runtime
from workflow._attributes import ALWAYS_UNIQUE, check_count, check_settable
from workflow._codec import decode_call, decode_headers, encode_result, error_info, with_header
from workflow._hooks import Hook
from workflow._run import Run
from workflow.decorators import StepDefinition
from workflow.errors import (
    AttributeConflictError,
    FatalError,
    NonDeterminismError,
    NotInWorkflowError,
    RetryableError,
    RunCancelledError,
    StreamClosedError,
    UndecodableValueError,
)
from workflow.types import RunMetadata, StepMetadata
from worlds.protocol import World
from worlds.semantics import PARENT_KEY, reopen_base
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    CommitRequest,
    EventKind,
    NewWorkItem,
    ReuseWindow,
    StepCompleted,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    WorkItem,
    utcnow,
)

__all__ = [
    "RELEASED",
    "StepRuntime",
    "attempts_exhausted",
    "completed_commit",
    "failed_commit",
    "run_step",
]


T = TypeVar("T")

RELEASED = "released"
"""``StepDiscarded.outcome`` of an attempt its worker gave back unfinished at shutdown."""


async def attempts_exhausted(world: World, item: WorkItem, step: StepDefinition[..., Any]) -> bool:
    """Whether ``item`` is past the step's last allowed attempt.

    Only a lease that expired (its worker died, or its outcome could not be
    committed) leads here: a lost attempt counts, so ``max_retries`` holds.
    An attempt released by a worker shutting down does not count.
    """
    allowed = step.retry.max_retries + 1
    if item.attempt <= allowed:
        return False
    events = await world.read_events(item.run_id)
    released = sum(
        1
        for event in events
        if isinstance(event, StepDiscarded)
        and event.step == item.number
        and event.outcome == RELEASED
    )
    return item.attempt > allowed + released + reopen_base(events, item.number)


_NEVER_RETRIED = (FatalError, NotInWorkflowError, NonDeterminismError, UndecodableValueError)
"""Errors that fail a step attempt for good: a fatal error, or API misuse that
no retry can fix (``workflow.sleep()`` in a step, say, or recorded arguments that no
longer validate as the step's annotations)."""


async def _reopen_base(world: World, item: WorkItem) -> int:
    """Attempts of ``item``'s step before the run was reopened to re-run it (0: none)."""
    return reopen_base(await world.read_events(item.run_id), item.number)


async def _run_metadata(world: World, run_id: str) -> RunMetadata:
    """The run's id, workflow and creation time, read from the world."""
    record = await world.get_run(run_id)
    if record is None:
        raise LookupError(f"run {run_id} of this step attempt no longer exists")
    parent = record.attributes.get(PARENT_KEY)
    parent_run_id = parent if isinstance(parent, str) else None
    return RunMetadata(record.id, record.workflow, record.created_at, parent_run_id)


class StepRuntime(_runtime.Runtime):
    """What step code sees: its metadata, and attributes scoped to this attempt."""

    def __init__(
        self, world: World, worker_id: str, item: WorkItem, name: str, run: RunMetadata
    ) -> None:
        self._world = world
        self._worker_id = worker_id
        self._item = item
        self._name = name
        self._run = run
        self._attributes: dict[str, AttributeValue] = {}

    @property
    def in_workflow(self) -> bool:
        """Always False: this runtime serves step code."""
        return False

    def default_world(self) -> World:
        """The worker's world: client calls in a step reach the world that runs it."""
        return self._world

    def call_step(
        self, step: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Not reached: a step called from a step runs directly."""
        raise NotInWorkflowError("steps called from a step run directly")

    async def set_attribute(
        self, key: str, value: Any, unique: bool, window: ReuseWindow | None = None
    ) -> AttributeValue:
        """Set an attribute on this step attempt, claiming it world-wide if unique.

        A unique claim never conflicts with another attempt of the same step.
        """
        if callable(value):
            value = value(self._attributes.get(key))
        key, checked = check_settable(key, value)
        if key not in self._attributes:
            check_count(len(self._attributes) + 1, "a step attempt")
        item = self._item
        event = AttributeSet(
            key=key,
            value=checked,
            unique=unique or key in ALWAYS_UNIQUE,
            step=item.number,
            attempt=item.attempt,
            ttl=None if window is None else window.ttl,
            release_on=frozenset() if window is None else window.release_on,
        )
        result = await self._world.commit(
            CommitRequest(
                run_id=item.run_id,
                worker_id=self._worker_id,
                lease=item,
                events=(event,),
                ack=False,
            )
        )
        if not result.ok:
            raise RunCancelledError(item.run_id, "the run closed or this attempt lost its lease")
        outcome = result.events[0]
        if isinstance(outcome, AttributeConflict):
            holder = Run[Any](outcome.holder_run_id, world=self._world)
            raise AttributeConflictError(key, checked, holder)
        self._attributes[key] = checked
        return checked

    async def get_attribute(self, key: str) -> AttributeValue:
        """An attribute this attempt set, or ``None``."""
        return self._attributes.get(key)

    async def list_attributes(self) -> dict[str, AttributeValue]:
        """The attributes this attempt set."""
        return dict(self._attributes)

    async def sleep(self, seconds: float) -> None:
        """Refused: a step is ordinary code."""
        raise NotInWorkflowError("workflow.sleep() is for workflows; use asyncio.sleep in a step")

    def create_hook(self, token: str | None, attributes: dict[str, Any] | None) -> Hook:
        """Refused: hooks belong to workflows."""
        raise NotInWorkflowError("create_hook() works in workflow code, not in steps")

    def now(self) -> datetime:
        """Wall-clock time: steps need not be deterministic."""
        return utcnow()

    def random(self) -> float:
        """An ordinary random float."""
        return _random.random()

    def uuid4(self) -> uuid.UUID:
        """An ordinary random UUID."""
        return uuid.uuid4()

    async def write_stream(self, name: str, data: bytes) -> None:
        """Append the chunk to the run's stream now, as this attempt makes it (a
        retried attempt writes again; readers see both)."""
        run_id = self._item.run_id
        written = await self._world.append_stream(run_id, name, [data])
        if written is None and await self._world.stream_closed(run_id, name):
            raise StreamClosedError(run_id, name)

    def run_metadata(self) -> RunMetadata:
        """The id, workflow name and creation time of the run this step belongs to."""
        return self._run

    def step_metadata(self) -> StepMetadata:
        """This attempt's run id, world-unique step id and attempt number."""
        item = self._item
        return StepMetadata(
            run_id=item.run_id,
            step_id=f"{item.run_id}.{item.number}",
            step_name=self._name,
            attempt=item.attempt,
        )

    def continue_as_new(self, args: tuple[Any, ...]) -> None:
        """Refused: only a workflow can continue as new."""
        raise NotInWorkflowError("continue_as_new() works in workflow code, not in steps")


async def run_step(
    world: World,
    worker_id: str,
    item: WorkItem,
    step: StepDefinition[..., Any],
    cancel_scope: anyio.CancelScope,
    lease_seconds: float,
    wake_eagerly: bool,
    run: RunMetadata | None = None,
    build_id: str | None = None,
) -> CommitRequest:
    """Run one attempt of ``step`` and return the commit that records its outcome.

    ``run`` is what the worker already knows about the step's run (from its
    cached workflow instance); without it, it is read from the world.

    With ``wake_eagerly`` the commit asks for the run's workflow item to be
    leased to this worker at once, so the run continues without a poll.

    Cancellation of ``cancel_scope`` (the run closed) yields a commit whose only
    effect is a ``StepDiscarded`` entry. ``build_id``, the worker's build, is
    recorded in the ``StepCompleted``.
    """
    outcome: EventKind | None = None
    retry_at: datetime | None = None
    runtime_token = None
    report = _observe.AttemptReport()
    try:
        with cancel_scope:
            try:
                if run is None:
                    run = await _run_metadata(world, item.run_id)
                runtime = StepRuntime(world, worker_id, item, step.name, run)
                runtime_token = _runtime.installed(runtime)
                if _observe.current() is None:  # the common case: no second decode
                    outcome, retry_at = await _attempt(world, item, step, report, build_id)
                else:
                    attempt = _observe.StepAttempt(
                        run_id=item.run_id,
                        workflow=run.workflow,
                        step=step.name,
                        number=item.number,
                        attempt=item.attempt,
                        headers=decode_headers(item.payload),
                    )
                    with _observe.step_attempt(attempt, report):
                        outcome, retry_at = await _attempt(world, item, step, report, build_id)
            except Exception as exc:  # the run's metadata could not be read
                outcome, retry_at = _failure(item, step, exc, report)
    finally:
        if runtime_token is not None:
            _runtime.uninstall(runtime_token)
    return _outcome_commit(item, worker_id, outcome, retry_at, lease_seconds, wake_eagerly)


def failed_commit(
    item: WorkItem,
    step: StepDefinition[..., Any],
    exc: Exception,
    worker_id: str,
    lease_seconds: float,
    wake_eagerly: bool,
) -> CommitRequest:
    """The commit of an attempt of ``step`` that failed with ``exc`` around its
    function (a transaction step that kept conflicting, say): a retry, or the
    step's failure, as if the function had raised it."""
    outcome, retry_at = _failure(item, step, exc, _observe.AttemptReport())
    return _outcome_commit(item, worker_id, outcome, retry_at, lease_seconds, wake_eagerly)


def completed_commit(
    item: WorkItem,
    result: bytes,
    worker_id: str,
    lease_seconds: float,
    wake_eagerly: bool,
    build_id: str | None = None,
) -> CommitRequest:
    """The commit of an attempt of ``item``'s step that returned ``result`` (encoded)
    without running here: an output an earlier attempt recorded elsewhere, copied by
    a worker of ``build_id``."""
    outcome = StepCompleted(
        step=item.number, attempt=item.attempt, result=result, build_id=build_id
    )
    return _outcome_commit(item, worker_id, outcome, None, lease_seconds, wake_eagerly)


def _outcome_commit(
    item: WorkItem,
    worker_id: str,
    outcome: EventKind | None,
    retry_at: datetime | None,
    lease_seconds: float,
    wake_eagerly: bool,
) -> CommitRequest:
    """The commit that records ``outcome`` (``None``: the attempt was cancelled)."""
    discard = StepDiscarded(
        step=item.number,
        attempt=item.attempt,
        outcome="cancelled" if outcome is None else type(outcome).__name__,
    )
    if outcome is None:  # cancelled: the run closed, or the worker is shutting down
        return CommitRequest(
            run_id=item.run_id, worker_id=worker_id, lease=item, ack=False, discard=discard
        )
    if isinstance(outcome, StepRetrying):
        payload = item.payload
        if _observe.current() is not None:
            payload = with_header(payload, _observe.DUE_HEADER, str(outcome.retry_at.timestamp()))
        next_attempt = NewWorkItem(
            kind="step",
            name=item.name,
            number=item.number,
            attempt=item.attempt + 1,
            payload=payload,
            available_at=retry_at,
        )
        schedule = (next_attempt,)
    else:
        schedule = (NewWorkItem(kind="workflow", lease=wake_eagerly),)
    return CommitRequest(
        run_id=item.run_id,
        worker_id=worker_id,
        lease=item,
        events=(outcome,),
        schedule=schedule,
        discard=discard,
        lease_seconds=lease_seconds,
    )


async def _attempt(
    world: World,
    item: WorkItem,
    step: StepDefinition[..., Any],
    report: _observe.AttemptReport,
    build_id: str | None,
) -> tuple[EventKind, datetime | None]:
    """Call the step once; return the event that records the outcome, and the retry time."""
    try:
        value = await _call(step, item.payload)
    except Exception as exc:
        base = 0
        if item.attempt > step.retry.max_retries and not isinstance(exc, _NEVER_RETRIED):
            base = await _reopen_base(world, item)  # a reopened run's re-run gets a fresh budget
        return _failure(item, step, exc, report, base)
    try:
        encoded = encode_result(value, f"the result of step {step.name!r}", step.fn)
    except TypeError as exc:  # no retry can make this result recordable
        report.outcome, report.error = "failed", exc
        return StepFailed(step=item.number, attempt=item.attempt, error=error_info(exc)), None
    report.outcome = "completed"
    completed = StepCompleted(
        step=item.number, attempt=item.attempt, result=encoded, build_id=build_id
    )
    return completed, None


def _failure(
    item: WorkItem,
    step: StepDefinition[..., Any],
    exc: Exception,
    report: _observe.AttemptReport,
    base: int = 0,
) -> tuple[EventKind, datetime | None]:
    """The event for an attempt that raised ``exc``: a retry, or the step's failure.

    ``base`` counts the attempts made before the run was reopened (``Run.retry``)."""
    report.error = exc
    error = error_info(exc)
    if isinstance(exc, _NEVER_RETRIED) or item.attempt - base > step.retry.max_retries:
        report.outcome = "failed"
        return StepFailed(step=item.number, attempt=item.attempt, error=error), None
    delay = step.retry.delay(item.attempt)
    if isinstance(exc, RetryableError) and exc.retry_after is not None:
        delay = exc.retry_after
    retry_at = utcnow() + timedelta(seconds=delay)
    report.outcome, report.retry_at = "retrying", retry_at
    retrying = StepRetrying(step=item.number, attempt=item.attempt, error=error, retry_at=retry_at)
    return retrying, retry_at


async def _call(step: StepDefinition[..., Any], payload: bytes) -> Any:
    """Decode the arguments and call the step; a plain ``def`` runs in a thread.

    Past the step's timeout the attempt fails with a ``TimeoutError`` naming the
    step and the limit (a thread that is still running is abandoned, and its
    result ignored).
    """
    args, kwargs = decode_call(payload, step.fn)
    if step.timeout is None:  # no scope to enter and leave around every step
        return await _called(step, args, kwargs)
    with anyio.move_on_after(step.timeout):
        return await _called(step, args, kwargs)
    raise TimeoutError(
        f"step {step.name!r} did not finish within its timeout of {step.timeout:g} s "
        f"(@step(timeout=...)); the attempt was stopped"
    )


async def _called(step: StepDefinition[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """The step's function called: awaited, or a plain ``def`` in a thread of its own."""
    if step.is_async:
        return await step.fn(*args, **kwargs)
    call = functools.partial(contextvars.copy_context().run, step.fn, *args, **kwargs)
    return await _in_daemon_thread(call)


async def _in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread of its own, abandoned if the attempt is cancelled.

    A cancelled attempt (its timeout, its run closed, or the worker's shutdown
    grace ran out) returns at once, so the worker can release the lease and
    exit: the thread is left to finish, and being a daemon, it does not keep
    the process alive (an anyio worker thread would, until the step ended).
    The caller waits in an anyio worker thread, which also keeps the number of
    thread steps in flight within anyio's default thread limit; on
    cancellation that wait is ended too.
    """
    finished = threading.Event()
    outcome: list[tuple[bool, Any]] = []

    def body() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # handed to the awaiting task
            outcome.append((False, exc))
        finally:
            finished.set()

    threading.Thread(target=body, name="workflow step", daemon=True).start()
    try:
        await anyio.to_thread.run_sync(finished.wait, abandon_on_cancel=True)
    finally:
        finished.set()  # a cancelled wait ends its waiting thread too
    ok, value = outcome[0]
    if not ok:
        raise value
    return cast(T, value)
