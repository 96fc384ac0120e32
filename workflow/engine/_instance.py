"""One workflow run in memory: its event loop, its replay cursor and its outbox.

Replay rules (``rfcs/0001-execution-model.md``):

* Calls the workflow makes (steps, timers, attributes, completion) are
  *commands*. A command is matched by position against the commands recorded
  in the log; past the end of the log it is new and goes to the outbox.
* *External* events (step results, timer firings) are delivered one at a time
  in log order, and the loop runs until quiescent after each. So the state of
  the workflow is a function of the order of external events alone, whatever
  batches the workers happened to see them in.
* Calls that answer at once (``set_attribute``) are resolved together at the
  next quiescent point, in call order; a unique claim needs the world first,
  so the instance reports itself blocked until the engine commits.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import hashlib
import random as _random
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any, assert_never
from uuid import UUID

from workflow import _observe, _runtime
from workflow._attributes import (
    ALWAYS_UNIQUE,
    check_count,
    check_pair,
    check_settable,
    check_token,
)
from workflow._codec import (
    decode_call,
    decode_headers,
    decode_result,
    encode_call,
    encode_result,
    error_info,
)
from workflow._hooks import Hook
from workflow.client import Run
from workflow.decorators import StepDefinition, WorkflowDefinition
from workflow.engine._children import child_run_id
from workflow.engine._commands import describe, is_command
from workflow.engine._holds import Holds
from workflow.engine._loop import WorkflowLoop
from workflow.engine._outbox import LATEST_TIMER, Commit, Outcome, PendingCall, WorkflowHook
from workflow.errors import (
    AttributeConflictError,
    ContinueAsNew,
    HookConflictError,
    NonDeterminismError,
    NotInWorkflowError,
    RunCancelledError,
    RunFailedError,
    StepFailedError,
)
from workflow.types import RunMetadata, StepMetadata
from worlds.protocol import World
from worlds.semantics import ON_PARENT_CLOSE_KEY, PARENT_KEY, effective_log, new_run_id
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    ChildClosed,
    ChildConflict,
    ChildStarted,
    CreateRunRequest,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    NewWorkItem,
    PatchMarker,
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
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StreamWritten,
    WaitCompleted,
    WaitCreated,
)

__all__ = ["Commit", "WorkflowInstance"]


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
        self.last_seq = 0
        self.latest_at = datetime.fromtimestamp(0, UTC)
        """The time of the latest event this instance read or wrote."""
        self.finished = False
        self.failure: BaseException | None = None
        self.step_definitions: dict[str, StepDefinition[..., Any]] = {}
        self.headers: dict[str, str] = {}
        """What the run's start stored with its arguments (a trace context); its steps carry it."""
        self._context = contextvars.copy_context()
        self._context.run(_runtime.installed, self)
        self._recorded: collections.deque[EventKind] = collections.deque()
        self._externals: collections.deque[EventKind] = collections.deque()
        self._own_seqs: set[int] = set()
        self._position = 0
        self._outbox = Commit()
        self._calls: list[PendingCall] = []
        self._steps: dict[int, tuple[asyncio.Future[Any], StepDefinition[..., Any]]] = {}
        self._waits: dict[int, asyncio.TimerHandle] = {}
        self._hooks: dict[int, WorkflowHook] = {}
        # by token, the first hook created with it, and payloads for tokens no hook has yet
        self._hook_tokens: dict[str, WorkflowHook] = {}
        self._unclaimed: dict[str, list[bytes]] = {}
        self._next_step = 1
        self._next_wait = 1
        self._next_hook = 1
        self._attributes: dict[str, AttributeValue] = {}
        self._started = False
        self._created_at = datetime.fromtimestamp(0, UTC)
        seed = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")
        self._rng = _random.Random(seed)
        self._main: asyncio.Task[Any] | None = None
        self._cancel: RunCancelRequested | None = None
        self._disposed = False
        self._next_child = 1
        self._children: set[str] = set()
        self._child_closed: dict[str, ChildClosed] = {}
        self._child_waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._patches: dict[str, bool] = {}
        self._holds = Holds(self)

    # ================================================================ engine side

    @property
    def position(self) -> int:
        """How many calls the body has made so far (the next call's position)."""
        return self._position

    def is_stale(self, events: list[EventKind]) -> bool:
        """True if ``events`` hold commands this instance did not issue (another
        worker advanced the run), so it must be rebuilt from the full log."""
        return self._main is not None and any(
            (is_command(e) and e.seq not in self._own_seqs) or isinstance(e, RunReopened)
            for e in events
        )

    def feed(self, events: list[EventKind]) -> None:
        """Take new log entries: queue recorded commands and external events.

        A log holding ``RunReopened`` or ``RunForked`` markers is fed whole and
        replayed as they say (``worlds.semantics.effective_log``).
        """
        if any(isinstance(e, (RunReopened, RunForked)) for e in events):
            events = effective_log(events)
        for event in events:
            if event.seq in self._own_seqs:
                self._own_seqs.discard(event.seq)
            elif is_command(event):
                self._recorded.append(event)
            else:
                self._externals.append(event)
            self.last_seq = max(self.last_seq, event.seq)
            self.latest_at = max(self.latest_at, event.at)

    def horizon(self) -> int | None:
        """The last sequence number up to which this instance knows the whole log
        (what it read, then what it wrote right after); None when a gap it has not
        read lies below something it wrote."""
        seq = self.last_seq
        while seq + 1 in self._own_seqs:
            seq += 1
        return None if any(own > seq for own in self._own_seqs) else seq

    def feed_outcome(self, event: StepCompleted | StepFailed) -> None:
        """Take a step's outcome before it is stored (one transaction per step): it
        is delivered by the next ``advance``; ``committed_outcome`` follows."""
        self._externals.append(event)
        self.latest_at = max(self.latest_at, event.at)

    def committed_outcome(self, appended: tuple[EventKind, ...], horizon: int) -> None:
        """Record what the world appended for a step outcome fed by ``feed_outcome``
        (first) and the commands ``take_commit`` handed over after it. The world
        checked that nothing the body would see came after ``horizon``."""
        self.committed(appended[1:])
        self.last_seq = max(horizon, *(event.seq for event in appended))
        self._own_seqs = {seq for seq in self._own_seqs if seq > self.last_seq}
        for event in appended:
            self.latest_at = max(self.latest_at, event.at)

    def advance(self) -> bool:
        """Run the workflow as far as it can go without I/O.

        Returns True when it is blocked on a unique claim the engine must commit
        first (then call ``committed`` and ``advance`` again).
        """
        while True:
            self._run_loop()
            if self.failure is not None or self.finished:
                return False
            if self._calls:
                if any(call.outcome is None for call in self._calls):
                    return True
                self._resolve_calls()
                continue
            if self._finish_if_done():
                return False
            if not self._externals:
                return False
            self._deliver(self._externals.popleft())

    def take_commit(self) -> Commit:
        """Hand over the outbox; the engine commits it and calls ``committed``."""
        if not self._started and (self._outbox.events or self.finished or self.failure):
            self._started = True
            self._outbox.events.insert(0, RunStarted())
            for call in self._calls:
                if call.outcome is None:
                    call.outbox_index += 1
        if self.failure is not None and not self.finished:
            self.finished = True
            self._outbox.events.append(RunFailed(error=error_info(self.failure)))
        commit, self._outbox = self._outbox, Commit()
        return commit

    def committed(self, appended: tuple[EventKind, ...]) -> None:
        """Record what the world appended for the last ``take_commit``."""
        for event in appended:
            self._own_seqs.add(event.seq)
            self.latest_at = max(self.latest_at, event.at)
        for call in self._calls:
            if call.outcome is None:
                outcome = appended[call.outbox_index]
                assert isinstance(outcome, Outcome)
                call.outcome = outcome
            call.outbox_index = -1

    def dispose(self) -> None:
        """Forget the instance; any further call from its code is refused."""
        self._disposed = True
        self.loop.close()

    # ================================================================ internals

    def _run_loop(self) -> None:
        try:
            self.loop.run_until_quiescent()
        except BaseException as exc:  # a callback escaped asyncio's own handling
            self.failure = self.failure or exc

    def _on_loop_error(self, context: dict[str, Any]) -> None:
        if self._disposed:
            return
        exc = context.get("exception")
        if isinstance(exc, NonDeterminismError):
            self.failure = self.failure or exc

    def _deliver(self, event: EventKind) -> None:
        """Let the body see one external event (``feed`` routed it here)."""
        self.loop.set_time(event.at.timestamp())
        match event:
            case RunCreated():
                self._start(event)
            case RunStarted():
                self._started = True
            case StepCompleted() | StepFailed():
                self._step_done(event)
            case WaitCompleted():
                handle = self._waits.pop(event.wait, None)
                if handle is not None:
                    self.loop.fire(handle)
            case HookReceived():
                self._hook_received(event)
            case RunCancelRequested():
                self._cancel_requested(event)
            case ChildClosed():
                self._child_done(event)
            case SlotAcquired():
                self._holds.acquired(event)
            case RunReopened() | RunForked():
                pass  # markers: ``feed`` already replays the log as they say
            case (
                StepStarted()
                | StepRetrying()
                | StepDiscarded()
                | AttributeSet()
                | AttributeConflict()
            ):
                # A step attempt's own record: the body waits for its outcome only.
                pass
            case (
                StepCreated()
                | WaitCreated()
                | HookCreated()
                | HookConflict()
                | RunCompleted()
                | RunFailed()
                | RunContinued()
                | RunCancelled()
                | ChildStarted()
                | ChildConflict()
                | PatchMarker()
                | StreamWritten()
                | SlotRequested()
                | SlotReleased()
            ):
                raise AssertionError(
                    f"{type(event).__name__} (seq {event.seq}) is a command: feed() matches "
                    "it against the body's calls and never delivers it"
                )
            case _:
                assert_never(event)

    def _step_done(self, event: StepCompleted | StepFailed) -> None:
        entry = self._steps.pop(event.step, None)
        if entry is None or entry[0].done():
            return
        future, definition = entry
        if isinstance(event, StepCompleted):
            future.set_result(decode_result(event.result, definition.fn))
        else:
            error = event.error
            future.set_exception(StepFailedError(definition.name, error.type, error.message))

    def _child_done(self, event: ChildClosed) -> None:
        self._child_closed[event.run_id] = event
        for waiter in self._child_waiters.pop(event.run_id, []):
            if not waiter.done():
                waiter.set_result(None)

    def _hook_received(self, event: HookReceived) -> None:
        if event.hook:
            hook = self._hooks.get(event.hook)
        else:  # carried over by continue-as-new; the hook may not exist yet
            hook = self._hook_tokens.get(event.token)
            if hook is None:
                self._unclaimed.setdefault(event.token, []).append(event.payload)
        if hook is not None:
            hook.deliver(event.payload)

    def _cancel_requested(self, event: RunCancelRequested) -> None:
        # The body gets CancelledError where it waits, once; it may catch it
        # and run cleanup steps until the world's grace deadline.
        if self._cancel is not None:
            return
        self._cancel = event
        if self._main is not None and not self._main.done():
            self._main.cancel(event.reason)

    def _start(self, event: RunCreated) -> None:
        self._created_at = event.at
        self._attributes = dict(event.attributes)
        try:
            self.headers = decode_headers(event.args)
            args, kwargs = decode_call(event.args, self.definition.fn)
            coro = self.definition.fn(*args, **kwargs)
        except Exception as exc:
            self.failure = exc
            return
        self._main = self._context.run(self.loop.create_task, coro, name=self.run_id)

    def _finish_if_done(self) -> bool:
        main = self._main
        if main is None or not main.done() or self.finished:
            return False
        self.finished = True
        if self._cancel is not None:
            self._command(RunCancelled(reason=self._cancel.reason), "the end of the workflow")
            return True
        if main.cancelled():
            error = error_info(asyncio.CancelledError("the workflow's main task was cancelled"))
            self._command(RunFailed(error=error), "the end of the workflow")
            return True
        exc = main.exception()
        if isinstance(exc, ContinueAsNew):
            try:
                args = encode_call(exc.args_for_next_run)
            except TypeError as err:
                self._command(RunFailed(error=error_info(err)), "continue_as_new")
            else:
                read = {token: hook.read for token, hook in self._hook_tokens.items()}
                continued = RunContinued(next_run_id=new_run_id(), args=args, hooks_read=read)
                self._command(continued, "continue_as_new")
            return True
        if exc is not None:
            self._command(RunFailed(error=error_info(exc)), "the end of the workflow")
            return True
        try:
            result = encode_result(main.result(), "the workflow's result")
        except TypeError as err:
            self._command(RunFailed(error=error_info(err)), "the end of the workflow")
        else:
            self._command(RunCompleted(result=result), "the end of the workflow")
        return True

    def _resolve_calls(self) -> None:
        calls, self._calls = self._calls, []
        for call in calls:
            outcome = call.outcome
            match outcome:
                case AttributeSet():
                    self._attributes[outcome.key] = outcome.value
                    call.future.set_result(outcome.value)
                case AttributeConflict():
                    holder = Run[Any](outcome.holder_run_id, world=self.world)
                    call.future.set_exception(
                        AttributeConflictError(outcome.key, outcome.value, holder)
                    )
                case HookCreated():
                    call.future.set_result(None)
                case HookConflict():
                    holder = Run[Any](outcome.holder_run_id, world=self.world)
                    call.future.set_exception(HookConflictError(outcome.token, holder))
                case ChildStarted():
                    self._children.add(outcome.run_id)
                    call.future.set_result(outcome.run_id)
                case ChildConflict():
                    holder = Run[Any](outcome.holder_run_id, world=self.world)
                    call.future.set_exception(
                        AttributeConflictError(outcome.key, outcome.value, holder)
                    )
                case SlotRequested():
                    call.future.set_result(outcome)
                case None:
                    raise AssertionError("a call is resolved only once its outcome is known")
                case _:
                    assert_never(outcome)

    def _next_recorded(self, issued: str) -> EventKind | None:
        """Match a new command against the log; None past the recorded end.

        Patch markers the body does not ask about here are passed over: the
        ``patched`` call that recorded one may since have been removed.
        """
        if self._disposed:
            raise NotInWorkflowError("this workflow instance was evicted")
        self._position += 1
        while self._recorded and isinstance(self._recorded[0], PatchMarker):
            self._recorded.popleft()
        return self._recorded.popleft() if self._recorded else None

    # what ``workflow.engine._holds`` issues commands with
    @property
    def outbox(self) -> Commit:
        """The commands and work not yet handed to the engine."""
        return self._outbox

    @property
    def calls(self) -> list[PendingCall]:
        """Calls answered at the next quiescent point."""
        return self._calls

    def next_recorded(self, issued: str) -> EventKind | None:
        """Match a new command against the log (see ``_next_recorded``)."""
        return self._next_recorded(issued)

    def mismatch(self, recorded: EventKind, issued: str) -> NonDeterminismError:
        """Fail the run: the body issued ``issued`` where the log holds ``recorded``."""
        return self._mismatch(recorded, issued)

    def _mismatch(self, recorded: EventKind, issued: str) -> NonDeterminismError:
        error = NonDeterminismError(self._position - 1, describe(recorded), issued)
        self.failure = self.failure or error
        return error

    def _command(self, event: EventKind, issued: str) -> None:
        """A completion command: matched like any other, then queued if new."""
        recorded = self._next_recorded(issued)
        if recorded is None:
            self._outbox.events.append(event)
        elif type(recorded) is not type(event):
            self._mismatch(recorded, issued)

    def _on_timer(self, handle: asyncio.TimerHandle) -> None:
        recorded = self._next_recorded("a timer")
        if recorded is None:
            number = self._next_wait
            when = min(max(handle.when(), self.loop.time()), LATEST_TIMER)
            until = datetime.fromtimestamp(when, UTC)
            self._outbox.events.append(WaitCreated(wait=number, until=until))
            self._outbox.schedule.append(
                NewWorkItem(
                    kind="timer", name=self.definition.name, number=number, available_at=until
                )
            )
        elif isinstance(recorded, WaitCreated):
            number = recorded.wait
        else:
            raise self._mismatch(recorded, "a timer")
        self._next_wait = max(self._next_wait, number + 1)
        self._waits[number] = handle

    # ================================================================ Runtime API

    @property
    def in_workflow(self) -> bool:
        """Always True: this runtime serves workflow code."""
        return True

    @property
    def attributes(self) -> dict[str, AttributeValue]:
        """The run's attributes as of the body's position in the log."""
        return dict(self._attributes)

    @property
    def replaying(self) -> bool:
        """True while the body has recorded commands still ahead of it in the log."""
        return bool(self._recorded)

    def default_world(self) -> None:
        """None: workflow code does no I/O, so client calls there get no world from here."""
        return None

    def call_step(
        self, step: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        """Record a step call (or match it against the log) and return its result."""
        issued = f"step {step.name!r}"
        recorded = self._next_recorded(issued)
        if recorded is None:
            number = self._next_step
            headers = self.headers
            if _observe.current() is not None:
                headers = {**headers, _observe.DUE_HEADER: str(self.now().timestamp())}
            payload = encode_call(args, kwargs, headers)
            self._outbox.events.append(StepCreated(step=number, name=step.name, args=payload))
            self._outbox.schedule.append(
                NewWorkItem(kind="step", name=step.name, number=number, payload=payload)
            )
        elif isinstance(recorded, StepCreated) and recorded.name == step.name:
            number = recorded.step
        else:
            raise self._mismatch(recorded, issued)
        self._next_step = max(self._next_step, number + 1)
        self.step_definitions[step.name] = step
        future: asyncio.Future[Any] = self.loop.create_future()
        self._steps[number] = (future, step)
        return _await(future)

    async def set_attribute(
        self, key: str, value: Any, unique: bool, window: ReuseWindow | None = None
    ) -> AttributeValue:
        """Set a run attribute; recorded, and answered from the log on replay."""
        if callable(value):
            value = value(self._attributes.get(key))
        key, value = check_settable(key, value)
        if key not in self._attributes:
            check_count(len(self._attributes) + 1)
        unique = unique or key in ALWAYS_UNIQUE
        issued = f"set_attribute({key!r})"
        recorded = self._next_recorded(issued)
        future: asyncio.Future[AttributeValue] = self.loop.create_future()
        if recorded is None:
            window = window or ReuseWindow()
            event = AttributeSet(
                key=key,
                value=value,
                unique=unique,
                ttl=window.ttl,
                release_on=window.release_on,
            )
            self._outbox.events.append(event)
            index = len(self._outbox.events) - 1
            self._calls.append(PendingCall(future, None if unique else event, index))
        elif isinstance(recorded, (AttributeSet, AttributeConflict)) and recorded.key == key:
            self._calls.append(PendingCall(future, recorded))
        else:
            raise self._mismatch(recorded, issued)
        return await future

    async def get_attribute(self, key: str) -> AttributeValue:
        """The run attribute as of this point of the log."""
        return self._attributes.get(key)

    async def list_attributes(self) -> dict[str, AttributeValue]:
        """All run attributes as of this point of the log."""
        return dict(self._attributes)

    async def sleep(self, seconds: float) -> None:
        """A durable timer (``asyncio.sleep`` inside a workflow does the same)."""
        await asyncio.sleep(seconds)

    def create_hook(self, token: str | None, attributes: dict[str, Any] | None) -> Hook:
        """Create a hook that ``resume_hook(token, payload)`` resumes from outside.

        The token is claimed in the world when the call is committed; if another
        open run's hook holds it, awaiting the hook raises ``HookConflictError``.
        """
        checked = dict(check_pair(k, v) for k, v in (attributes or {}).items())
        check_count(len(checked))
        token = check_token(token) if token is not None else f"hook_{self.uuid4().hex}"
        recorded = self._next_recorded("create_hook")
        future: asyncio.Future[None] = self.loop.create_future()
        if recorded is None:
            number = self._next_hook
            self._outbox.events.append(HookCreated(hook=number, token=token, attributes=checked))
            self._calls.append(PendingCall(future, None, len(self._outbox.events) - 1))
        elif isinstance(recorded, (HookCreated, HookConflict)):
            number = recorded.hook
            token = recorded.token
            self._calls.append(PendingCall(future, recorded))
        else:
            raise self._mismatch(recorded, "create_hook")
        self._next_hook = max(self._next_hook, number + 1)
        hook = WorkflowHook(token, future, self.loop)
        self._hooks[number] = hook
        if token not in self._hook_tokens:
            self._hook_tokens[token] = hook
            for payload in self._unclaimed.pop(token, []):
                hook.deliver(payload)
        return hook

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
        parent = self._attributes.get(PARENT_KEY)
        parent_run_id = parent if isinstance(parent, str) else None
        return RunMetadata(self.run_id, self.definition.name, self._created_at, parent_run_id)

    def step_metadata(self) -> StepMetadata:
        """Refused: workflow code is not a step."""
        raise NotInWorkflowError("get_step_metadata() works in steps, not in workflow code")

    def continue_as_new(self, args: tuple[Any, ...]) -> None:
        """End the body here; the engine records ``RunContinued`` with ``args``."""
        raise ContinueAsNew(args)

    async def start_child(self, request: _runtime.ChildRequest) -> str:
        """Record a child start (or match it against the log); the child's run id.

        The engine creates the run before it commits the command (see
        ``workflow.engine._children``); replay answers from the log.
        """
        issued = f"start({request.workflow!r})"
        recorded = self._next_recorded(issued)
        future: asyncio.Future[str] = self.loop.create_future()
        if recorded is None:
            number = self._next_child
            run_id = child_run_id(self.run_id, number, self.loop.time())
            attributes = dict(request.attributes)
            attributes[PARENT_KEY] = self.run_id
            attributes[ON_PARENT_CLOSE_KEY] = request.on_parent_close
            check_count(len(attributes))
            timeout_at = None
            if request.timeout_seconds is not None:
                when = min(self.loop.time() + request.timeout_seconds, LATEST_TIMER)
                timeout_at = datetime.fromtimestamp(when, UTC)
            self._outbox.children[number] = CreateRunRequest(
                run_id=run_id,
                workflow=request.workflow,
                args=request.args,
                attributes=attributes,
                unique=request.unique,
                timeout_at=timeout_at,
            )
            event = ChildStarted(child=number, run_id=run_id, workflow=request.workflow)
            self._outbox.events.append(event)
            self._calls.append(PendingCall(future, None, len(self._outbox.events) - 1))
        elif (
            isinstance(recorded, ChildStarted) and recorded.workflow == request.workflow
        ) or isinstance(recorded, ChildConflict):
            number = recorded.child
            self._calls.append(PendingCall(future, recorded))
        else:
            raise self._mismatch(recorded, issued)
        self._next_child = max(self._next_child, number + 1)
        return await future

    async def child_result(self, run_id: str, fn: Any, timeout: float | None) -> Any:
        """Wait durably for child ``run_id`` to close (following continue-as-new)."""
        if timeout is None:
            return await self._child_outcome(run_id, fn)
        return await asyncio.wait_for(self._child_outcome(run_id, fn), timeout)

    async def _child_outcome(self, run_id: str, fn: Any) -> Any:
        if run_id not in self._children:
            raise NotInWorkflowError(
                f"run {run_id} is not a child of this run: workflow code waits durably only "
                "for runs it started; read other runs from a step"
            )
        while True:
            closed = self._child_closed.get(run_id)
            if closed is None:
                waiter: asyncio.Future[None] = self.loop.create_future()
                self._child_waiters.setdefault(run_id, []).append(waiter)
                await waiter
                continue
            if closed.status is RunStatus.CONTINUED and closed.next_run_id is not None:
                run_id = closed.next_run_id
                continue
            if closed.status is RunStatus.COMPLETED:
                assert closed.result is not None
                return decode_result(closed.result, fn)
            if closed.status is RunStatus.FAILED:
                assert closed.error is not None
                raise RunFailedError(run_id, closed.error.type, closed.error.message)
            raise RunCancelledError(run_id, closed.reason)

    async def write_stream(self, name: str, data: bytes) -> None:
        """Record the chunk as a ``StreamWritten`` command: the world appends it to the
        stream when the command commits, once; replay matches it and writes nothing."""
        issued = f"write_stream({name!r})"
        recorded = self._next_recorded(issued)
        if recorded is None:
            self._outbox.events.append(StreamWritten(name=name, data=data))
        elif not (isinstance(recorded, StreamWritten) and recorded.name == name):
            raise self._mismatch(recorded, issued)

    def hold(
        self, key: str, value: AttributeValue, limit: int
    ) -> AbstractAsyncContextManager[None]:
        """A durable semaphore block; see ``workflow.hold`` and ``workflow.engine._holds``."""
        return self._holds.block(key, value, limit)

    def patched(self, name: str) -> bool:
        """True for a run that is new here or recorded the marker; False for one that
        passed this point before the patch (the log goes on without the marker)."""
        if name in self._patches:
            return self._patches[name]
        if self._disposed:
            raise NotInWorkflowError("this workflow instance was evicted")
        markers = []
        while self._recorded and isinstance(self._recorded[0], PatchMarker):
            markers.append(self._recorded.popleft())
        found = any(m.name == name for m in markers if isinstance(m, PatchMarker))
        for marker in reversed(markers):
            if not (isinstance(marker, PatchMarker) and marker.name == name):
                self._recorded.appendleft(marker)
        if found:
            taken = True
        elif self._recorded:
            taken = False  # the run issued other commands here: it took the old code
        else:
            self._outbox.events.append(PatchMarker(name=name))
            taken = True
        self._patches[name] = taken
        return taken


async def _await(future: asyncio.Future[Any]) -> Any:
    return await future
