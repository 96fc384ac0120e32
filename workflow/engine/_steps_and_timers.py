"""Steps and timers in workflow code: the commands that queue work in the world.

A step call issues ``StepCreated`` and queues the step's work item; a timer
(``sleep``, ``asyncio.sleep``, ``wait_for``: any ``call_at`` on the workflow
loop) issues ``WaitCreated`` and queues a timer item. What comes back is
external: ``StepCompleted``/``StepFailed`` settle the step call,
``WaitCompleted`` fires the timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

from workflow import _observe
from workflow._codec import decode_result, encode_call
from workflow.decorators import StepDefinition
from workflow.engine._loop import LATEST_TIMER, WorkflowLoop
from workflow.engine._recorder import Recorder
from workflow.errors import StepFailedError, UndecodableValueError
from worlds.types import (
    NewWorkItem,
    StepCompleted,
    StepCreated,
    StepFailed,
    WaitCompleted,
    WaitCreated,
)

__all__ = ["StepsAndTimers"]


class StepsAndTimers:
    """One run's step calls and durable timers: their numbers and who waits."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop, workflow: str) -> None:
        self._recorder = recorder
        self._loop = loop
        self._workflow = workflow
        self.definitions: dict[str, StepDefinition[..., Any]] = {}
        """The steps the body called, by name (the worker learns them from here)."""
        self.headers: dict[str, str] = {}
        """What the run's start stored with its arguments (a trace context); steps carry it."""
        self._next_step = 1
        self._next_wait = 1
        self._steps: dict[int, tuple[asyncio.Future[Any], StepDefinition[..., Any]]] = {}
        self._waits: dict[int, asyncio.TimerHandle] = {}

    def call(
        self, step: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        """Record a step call (or match it against the log); its result, once it comes."""
        name = step.name

        def new() -> StepCreated:
            number = self._next_step
            headers = self.headers
            if _observe.current() is not None:
                now = datetime.fromtimestamp(self._loop.time(), UTC)
                headers = {**headers, _observe.DUE_HEADER: str(now.timestamp())}
            payload = encode_call(args, kwargs, headers, fn=step.fn, owner=f"step {name!r}")
            self._recorder.outbox.schedule.append(
                NewWorkItem(kind="step", name=name, number=number, payload=payload)
            )
            return StepCreated(step=number, name=name, args=payload)

        created = self._recorder.record(
            f"step {name!r}", StepCreated, new, lambda recorded: recorded.name == name
        )
        number = created.step
        self._next_step = max(self._next_step, number + 1)
        self.definitions[name] = step
        future: asyncio.Future[Any] = self._loop.create_future()
        self._steps[number] = (future, step)
        return _await(future)

    def step_done(self, event: StepCompleted | StepFailed) -> None:
        """Deliver a step's outcome to its call."""
        entry = self._steps.pop(event.step, None)
        if entry is None or entry[0].done():
            return
        future, definition = entry
        if isinstance(event, StepCompleted):
            try:
                future.set_result(decode_result(event.result, definition.fn))
            except UndecodableValueError as exc:  # raised where the workflow awaits the step
                future.set_exception(exc)
        else:
            error = event.error
            future.set_exception(StepFailedError(definition.name, error.type, error.message))

    def timer(self, handle: asyncio.TimerHandle) -> None:
        """Record a timer the loop was asked for (or match it against the log)."""

        def new() -> WaitCreated:
            number = self._next_wait
            when = min(max(handle.when(), self._loop.time()), LATEST_TIMER)
            until = datetime.fromtimestamp(when, UTC)
            self._recorder.outbox.schedule.append(
                NewWorkItem(kind="timer", name=self._workflow, number=number, available_at=until)
            )
            return WaitCreated(wait=number, until=until)

        number = self._recorder.record("a timer", WaitCreated, new).wait
        self._next_wait = max(self._next_wait, number + 1)
        self._waits[number] = handle

    def timer_fired(self, event: WaitCompleted) -> None:
        """Deliver a due timer: its callback runs (a late firing is ignored)."""
        handle = self._waits.pop(event.wait, None)
        if handle is not None:
            self._loop.fire(handle)


async def _await(future: asyncio.Future[Any]) -> Any:
    return await future
