"""One workflow run in memory: its lifecycle, and the routing between its parts.

Replay rules (``rfcs/0001-execution-model.md``):

* Calls the workflow makes (steps, timers, attributes, completion) are
  *commands*. A command is matched by position against the commands recorded
  in the log; past the end of the log it is new and goes to the outbox. The
  recorder (``workflow.engine._recorder``) decides that for every kind; one
  command component per kind keeps that kind's state.
* *External* events (step results, timer firings) are delivered one at a time
  in log order, and the loop runs until quiescent after each. So the state of
  the workflow is a function of the order of external events alone, whatever
  batches the workers happened to see them in.
* Calls that answer at once (``set_attribute``) are resolved together at the
  next quiescent point, in call order; a unique claim needs the world first,
  so the instance reports itself blocked until the engine commits.

The instance keeps the run's lifecycle (start, cancellation, the closing
command, its failure), routes each external event to the part it concerns,
and answers the ``Runtime`` API with one-line delegations to the parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import random as _random
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, assert_never
from uuid import UUID

from workflow import _runtime
from workflow._codec import decode_call, decode_headers, encode_result, encode_start, error_info
from workflow._hooks import Hook
from workflow._updates import Update
from workflow.decorators import StepDefinition, WorkflowDefinition
from workflow.engine._children import Children
from workflow.engine._failures import failed, is_handler_run
from workflow.engine._holds import Holds
from workflow.engine._hooks import Hooks
from workflow.engine._loop import WorkflowLoop
from workflow.engine._patches import Patches
from workflow.engine._rates import RateTokens
from workflow.engine._recorder import Commit, Recorder
from workflow.engine._run_attributes import RunAttributes
from workflow.engine._steps_and_timers import StepsAndTimers
from workflow.engine._streams import Streams
from workflow.engine._updates import Updates
from workflow.errors import ContinueAsNew, NonDeterminismError, NotInWorkflowError
from workflow.types import RunMetadata, StepMetadata
from worlds.events import EPOCH, ExternalEvent
from worlds.protocol import World
from worlds.semantics import PARENT_KEY, new_run_id
from worlds.types import (
    AttributeValue,
    ChildClosed,
    ErrorInfo,
    EventKind,
    HookReceived,
    ReuseWindow,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunForked,
    RunReopened,
    RunStarted,
    SlotAcquired,
    StepCompleted,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    UpdateReceived,
    WaitCompleted,
)

__all__ = ["Commit", "WorkflowInstance"]

_END = "the end of the workflow"


class WorkflowInstance(_runtime.Runtime):
    """A run's workflow body, replayed from its log and kept going."""

    def __init__(
        self, run_id: str, definition: WorkflowDefinition[..., Any], world: World | None
    ) -> None:
        self.run_id = run_id
        self.definition = definition
        self.world = world
        # asyncio's I/O methods stay abstract on purpose: workflow code must not do I/O
        self.loop = WorkflowLoop(self._on_timer, self._on_loop_error)  # type: ignore[abstract]
        self.finished = False
        self.failure: BaseException | None = None
        self._context = contextvars.copy_context()
        self._context.run(_runtime.installed, self)
        self._recorder = Recorder(self._fail)
        self._work = StepsAndTimers(self._recorder, self.loop, definition.name)
        self._attributes = RunAttributes(self._recorder, self.loop, world)
        self._metadata: RunMetadata | None = None
        """Fixed once ``RunCreated`` is delivered (``$parent`` is set at creation only)."""
        self._limits: dict[str, int] = {}
        """The run's ``RunCreated.limits``, handed to the next run by continue-as-new."""
        self._handler_run = False
        """Whether this run is a failure handler's: its own failure starts no handler."""
        self._main: asyncio.Task[Any] | None = None
        self._cancel: RunCancelRequested | None = None

    # The parts most runs never use are made on first use (an instance is made
    # for every run a worker starts or rebuilds, on the hot path).

    @cached_property
    def _rng(self) -> _random.Random:
        # seeding costs about as much as the rest of a one-step run's instance
        seed = int.from_bytes(hashlib.sha256(self.run_id.encode()).digest()[:8], "big")
        return _random.Random(seed)

    @cached_property
    def _hooks(self) -> Hooks:
        return Hooks(self._recorder, self.loop, self.world)

    @cached_property
    def _children(self) -> Children:
        return Children(self._recorder, self.loop, self.run_id, self.world)

    @cached_property
    def _holds(self) -> Holds:
        return Holds(self._recorder, self.loop)

    @cached_property
    def _rates(self) -> RateTokens:
        return RateTokens(self._recorder, self.loop)

    @cached_property
    def _patches(self) -> Patches:
        return Patches(self._recorder)

    @cached_property
    def _streams(self) -> Streams:
        return Streams(self._recorder, self.run_id)

    @cached_property
    def _updates(self) -> Updates:
        return Updates(self._recorder, self.loop)

    # ================================================================ engine side

    @property
    def position(self) -> int:
        """How many calls the body has made so far (the next call's position)."""
        return self._recorder.position

    @property
    def last_seq(self) -> int:
        """The highest sequence number fed in."""
        return self._recorder.last_seq

    @property
    def latest_at(self) -> datetime:
        """The time of the latest event this instance read or wrote."""
        return self._recorder.latest_at

    @property
    def step_definitions(self) -> dict[str, StepDefinition[..., Any]]:
        """The steps the body called, by name."""
        return self._work.definitions

    @property
    def headers(self) -> dict[str, str]:
        """What the run's start stored with its arguments (a trace context)."""
        return self._work.headers

    def is_stale(self, events: list[EventKind]) -> bool:
        """True if ``events`` hold commands this instance did not issue (another
        worker advanced the run), so it must be rebuilt from the full log."""
        return self._main is not None and self._recorder.is_stale(events)

    def feed(self, events: list[EventKind]) -> None:
        """Take new log entries (``Recorder.feed``)."""
        self._recorder.feed(events)

    def feed_outcome(self, event: StepCompleted | StepFailed) -> int | None:
        """Take a step's outcome before it is stored (``Recorder.feed_outcome``)."""
        return self._recorder.feed_outcome(event)

    def advance(self) -> bool:
        """Run the workflow as far as it can go without I/O.

        Returns True when it is blocked on a unique claim the engine must commit
        first (then call ``committed`` and ``advance`` again).
        """
        recorder = self._recorder
        externals = recorder.externals
        while True:
            self._run_loop()
            if self.failure is not None or self.finished:
                return False
            if recorder.calls:
                if recorder.needs_world:
                    return True
                recorder.answer_calls()
                continue
            if self._finish_if_done():
                return False
            if not externals:
                return False
            self._deliver(externals.popleft())

    def take_commit(self) -> Commit:
        """Hand over the outbox; the engine commits it and calls ``committed``."""
        ended = self.finished or self.failure is not None
        if self.failure is not None and not self.finished:
            self.finished = True
            self._recorder.outbox.events.append(self._failed(error_info(self.failure)))
        return self._recorder.take_commit(ended)

    def committed(self, appended: tuple[EventKind, ...]) -> None:
        """Record what the world appended for the last ``take_commit``."""
        self._recorder.committed(appended)

    def dispose(self) -> None:
        """Forget the instance; any further call from its code is refused."""
        self._recorder.closed = True
        self.loop.close()

    # ================================================================ lifecycle

    def _fail(self, error: BaseException) -> None:
        self.failure = self.failure or error

    def _run_loop(self) -> None:
        try:
            self.loop.run_until_quiescent()
        except BaseException as exc:  # a callback escaped asyncio's own handling
            self._fail(exc)

    def _on_loop_error(self, context: dict[str, Any]) -> None:
        if self._recorder.closed:
            return
        exc = context.get("exception")
        if isinstance(exc, NonDeterminismError):
            self._fail(exc)

    def _on_timer(self, handle: asyncio.TimerHandle) -> None:
        self._work.timer(handle)

    def _deliver(self, event: ExternalEvent) -> None:
        """Let the body see one external event: route it to the part it concerns."""
        self.loop.set_time(event.at.timestamp())
        match event:
            case RunCreated():
                self._start(event)
            case RunStarted():
                self._recorder.started = True
            case StepCompleted() | StepFailed():
                self._work.step_done(event)
            case WaitCompleted():
                self._work.timer_fired(event)
            case HookReceived():
                self._hooks.received(event)
            case UpdateReceived():
                self._updates.received(event)
            case RunCancelRequested():
                self._cancel_requested(event)
            case ChildClosed():
                self._children.closed(event)
            case SlotAcquired():
                self._holds.acquired(event)
            case RunReopened() | RunForked():
                pass  # markers: ``feed`` already replays the log as they say
            case StepStarted() | StepRetrying() | StepDiscarded():
                pass  # a step attempt's own record: the body waits for its outcome only
            case _:
                assert_never(event)

    def _start(self, event: RunCreated) -> None:
        self._limits = event.limits  # the next run takes over these slots (continue-as-new)
        self._attributes.start(event.attributes)
        self._handler_run = is_handler_run(event.attributes)
        parent = event.attributes.get(PARENT_KEY)
        parent_run_id = parent if isinstance(parent, str) else None
        self._metadata = RunMetadata(self.run_id, self.definition.name, event.at, parent_run_id)
        try:
            self._work.headers = decode_headers(event.args)
            args, kwargs = decode_call(event.args, self.definition.fn)
            coro = self.definition.fn(*args, **kwargs)
        except Exception as exc:
            self.failure = exc
            return
        self._main = self._context.run(self.loop.create_task, coro, name=self.run_id)

    def _cancel_requested(self, event: RunCancelRequested) -> None:
        # The body gets CancelledError where it waits, once; it may catch it
        # and run cleanup steps until the world's grace deadline.
        if self._cancel is not None:
            return
        self._cancel = event
        if self._main is not None and not self._main.done():
            self._main.cancel(event.reason)

    def _finish_if_done(self) -> bool:
        main = self._main
        if main is None or not main.done() or self.finished:
            return False
        self.finished = True
        if self._cancel is not None:
            self._end(RunCancelled(reason=self._cancel.reason), _END)
            return True
        if main.cancelled():
            error = error_info(asyncio.CancelledError("the workflow's main task was cancelled"))
            self._end(self._failed(error), _END)
            return True
        exc = main.exception()
        if isinstance(exc, ContinueAsNew):
            try:
                args = encode_start(self.definition, exc.args_for_next_run)
            except TypeError as err:
                self._end(self._failed(error_info(err)), "continue_as_new")
            else:
                read = self._hooks.reads()
                continued = RunContinued(
                    next_run_id=new_run_id(), args=args, hooks_read=read, limits=self._limits
                )
                self._end(continued, "continue_as_new")
            return True
        if exc is not None:
            self._end(self._failed(error_info(exc)), _END)
            return True
        try:
            result = encode_result(main.result(), "the workflow's result", self.definition.fn)
        except TypeError as err:
            self._end(self._failed(error_info(err)), _END)
        else:
            self._end(RunCompleted(result=result), _END)
        return True

    def _failed(self, error: ErrorInfo) -> RunFailed:
        """The run's failure, naming its ``on_failure`` handler for the world to start."""
        return failed(self.definition, self.run_id, error, self._handler_run)

    def _end(
        self, event: RunCompleted | RunFailed | RunContinued | RunCancelled, issued: str
    ) -> None:
        """The closing command: matched like any other, then queued if new."""
        with contextlib.suppress(NonDeterminismError):  # the run's failure now
            self._recorder.record(issued, type(event), lambda: event)

    # ================================================================ Runtime API

    @property
    def in_workflow(self) -> bool:
        """Always True: this runtime serves workflow code."""
        return True

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        """The run's attributes as of the body's position in the log."""
        return dict(self._attributes.values)

    @property
    def replaying(self) -> bool:
        """True while the body has recorded commands still ahead of it in the log."""
        return self._recorder.replaying

    def default_world(self) -> None:
        """None: workflow code does no I/O, so client calls there get no world from here."""
        return None

    def call_step(
        self, step: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        """Record a step call (or match it against the log) and return its result."""
        return self._work.call(step, args, kwargs)

    async def set_attribute(
        self, key: str, value: Any, unique: bool, window: ReuseWindow | None = None
    ) -> AttributeValue:
        """Set a run attribute; recorded, and answered from the log on replay."""
        return await self._attributes.set(key, value, unique, window)

    async def get_attribute(self, key: str) -> AttributeValue:
        """The run attribute as of this point of the log."""
        return self._attributes.values.get(key)

    async def list_attributes(self) -> dict[str, AttributeValue]:
        """All run attributes as of this point of the log."""
        return dict(self._attributes.values)

    async def sleep(self, seconds: float) -> None:
        """A durable timer (``asyncio.sleep`` inside a workflow does the same)."""
        await asyncio.sleep(seconds)

    async def sleep_until(self, when: datetime) -> None:
        """A durable timer due at ``when``: always recorded, even for a past moment
        (``asyncio.sleep`` of zero or less records nothing), so the log shows it."""
        woken: asyncio.Future[None] = self.loop.create_future()
        handle = self.loop.call_at(when.timestamp(), _wake, woken)
        try:
            await woken
        finally:
            handle.cancel()

    def create_hook(self, token: str | None, attributes: dict[str, Any] | None) -> Hook:
        """Create a hook that ``resume_hook(token, payload)`` resumes from outside.

        The token is claimed in the world when the call is committed; if another
        open run's hook holds it, awaiting the hook raises ``HookConflictError``.
        """
        return self._hooks.create(token, attributes, self.uuid4)

    def now(self) -> datetime:
        """The time of the event being processed."""
        return datetime.fromtimestamp(self.loop.time(), UTC)

    def random(self) -> float:
        """A float from the run's seeded generator."""
        return self._rng.random()

    def uuid4(self) -> UUID:
        """A version-4 UUID from the run's seeded generator."""
        return UUID(int=self._rng.getrandbits(128), version=4)

    def run_metadata(self) -> RunMetadata:
        """This run's id, workflow, creation time and parent run (if it is a child)."""
        if self._metadata is None:  # before RunCreated is delivered
            return RunMetadata(self.run_id, self.definition.name, EPOCH, None)
        return self._metadata

    def step_metadata(self) -> StepMetadata:
        """Refused: workflow code is not a step."""
        raise NotInWorkflowError("get_step_metadata() works in steps, not in workflow code")

    def continue_as_new(self, args: tuple[Any, ...]) -> None:
        """End the body here; the engine records ``RunContinued`` with ``args``."""
        raise ContinueAsNew(args)

    async def start_child(self, request: _runtime.ChildRequest) -> str:
        """Record a child start (or match it against the log); the child's run id."""
        return await self._children.start(request)

    async def child_result(self, run_id: str, fn: Any, timeout: float | None) -> Any:
        """Wait durably for child ``run_id`` to close (following continue-as-new)."""
        return await self._children.result(run_id, fn, timeout)

    async def write_stream(self, name: str, data: bytes) -> None:
        """Record the chunk as a ``StreamWritten`` command (written once, when it commits)."""
        self._streams.write(name, data)

    async def close_stream(self, name: str) -> None:
        """Record a ``StreamClosed`` command (the stream closes when it commits)."""
        self._streams.close(name)

    def hold(
        self, key: str, value: AttributeValue, limit: int, priority: int = 0
    ) -> AbstractAsyncContextManager[None]:
        """A durable semaphore block; see ``workflow.hold`` and ``workflow.engine._holds``."""
        return self._holds.block(key, value, limit, priority)

    async def rate_limit(self, key: str, value: AttributeValue, limit: int, per: float) -> None:
        """Wait durably for a token; see ``workflow.rate_limit`` and ``workflow.engine._rates``."""
        await self._rates.take(key, value, limit, per)

    def receive_updates(self, name: str) -> AsyncIterator[Update]:
        """The updates sent to this run under ``name``; see ``workflow.engine._updates``."""
        return self._updates.receive(name)

    def patched(self, name: str) -> bool:
        """Whether this run takes the new branch of patch ``name`` (``_patches``)."""
        return self._patches.patched(name)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
