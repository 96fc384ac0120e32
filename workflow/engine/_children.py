"""Child runs on the engine side: the command in the parent, and creating the child.

A child start in workflow code (``Children.start``) becomes a ``ChildStarted``
command in the parent's outbox, with the ``CreateRunRequest`` beside it.
Before the worker commits that outbox it creates each child
(``create_children``); a refused unique pair turns the command into a
``ChildConflict``. The child's run id is a function of the parent's id and the
child's number, so a worker that crashed between creating the child and
committing the parent's command creates nothing the second time: the world
answers that the run exists, and the command is committed as it was meant to
be. The parent learns that a child closed from the external ``ChildClosed``.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from workflow._attributes import check_count
from workflow._codec import decode_result
from workflow._run import Run
from workflow._runtime import ChildRequest
from workflow.engine._loop import LATEST_TIMER, WorkflowLoop
from workflow.engine._recorder import Recorder
from workflow.errors import (
    AttributeConflictError,
    NotInWorkflowError,
    RateLimitExceededError,
    RunCancelledError,
    RunFailedError,
)
from worlds.protocol import World
from worlds.semantics import ON_PARENT_CLOSE_KEY, PARENT_KEY
from worlds.types import (
    ChildClosed,
    ChildConflict,
    ChildStarted,
    CreateRunRequest,
    EventKind,
    RunStatus,
)

__all__ = ["Children", "child_run_id", "create_children"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def child_run_id(parent_run_id: str, child: int, at_seconds: float) -> str:
    """The run id of child number ``child`` of ``parent_run_id``, started at ``at_seconds``.

    Shaped like every run id (26 characters that sort by creation time: 48 bits
    of milliseconds, then 80 bits drawn from the parent's id and the number),
    and the same on every replay.
    """
    millis = max(int(at_seconds * 1000), 0) & ((1 << 48) - 1)
    digest = hashlib.sha256(f"{parent_run_id}/child/{child}".encode()).digest()
    number = (millis << 80) | int.from_bytes(digest[:10], "big")
    chars = []
    for _ in range(26):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


async def create_children(
    world: World, events: list[EventKind], requests: Mapping[int, CreateRunRequest]
) -> None:
    """Create the child run of every ``ChildStarted`` in ``events`` (an outbox);
    replace the command by a ``ChildConflict`` where a unique pair is held."""
    for index, event in enumerate(events):
        if not isinstance(event, ChildStarted):
            continue
        request = requests[event.child]
        try:
            created = await world.create_run(request)
        except ValueError:
            if await world.get_run(request.run_id) is None:
                raise
            continue  # created by an earlier try of this task that did not commit
        conflict = created.conflict
        if conflict is not None and conflict.holder_run_id != request.run_id:
            rate = request.rates.get(conflict.key) if conflict.retry_after is not None else None
            events[index] = ChildConflict(
                child=event.child,
                run_id=request.run_id,
                key=conflict.key,
                value=conflict.value,
                holder_run_id=conflict.holder_run_id,
                limit=conflict.limit if rate is None else rate.limit,
                retry_after=conflict.retry_after,
                per=None if rate is None else rate.per,
            )


def _refusal(conflict: ChildConflict, world: World | None) -> AttributeConflictError:
    """The error a refused child start raises in the parent (as ``start`` would)."""
    holder = Run[Any](conflict.holder_run_id, world=world)
    if conflict.retry_after is not None and conflict.limit is not None:
        return RateLimitExceededError(
            conflict.key,
            conflict.value,
            holder,
            limit=conflict.limit,
            per=conflict.per or 0.0,
            retry_after=conflict.retry_after,
        )
    return AttributeConflictError(conflict.key, conflict.value, holder, limit=conflict.limit)


class Children:
    """One run's child starts and what it knows of their closing."""

    def __init__(
        self, recorder: Recorder, loop: WorkflowLoop, run_id: str, world: World | None
    ) -> None:
        self._recorder = recorder
        self._loop = loop
        self._run_id = run_id
        self._world = world
        self._next = 1
        self._started: set[str] = set()
        self._closed: dict[str, ChildClosed] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    async def start(self, request: ChildRequest) -> str:
        """Record a child start (or match it against the log); the child's run id.

        The engine creates the run before it commits the command
        (``create_children``); replay answers from the log.
        """
        future: asyncio.Future[str] = self._loop.create_future()

        def new() -> ChildStarted:
            number = self._next
            run_id = child_run_id(self._run_id, number, self._loop.time())
            attributes = dict(request.attributes)
            attributes[PARENT_KEY] = self._run_id
            attributes[ON_PARENT_CLOSE_KEY] = request.on_parent_close
            check_count(len(attributes))
            timeout_at = start_at = None
            if request.timeout_seconds is not None:
                when = min(self._loop.time() + request.timeout_seconds, LATEST_TIMER)
                timeout_at = datetime.fromtimestamp(when, UTC)
            if request.delay_seconds is not None:
                when = min(self._loop.time() + request.delay_seconds, LATEST_TIMER)
                start_at = datetime.fromtimestamp(when, UTC)
            self._recorder.outbox.children[number] = CreateRunRequest(
                run_id=run_id,
                workflow=request.workflow,
                args=request.args,
                attributes=attributes,
                unique=request.unique,
                timeout_at=timeout_at,
                limits=request.limits,
                rates=request.rates,
                start_at=start_at,
                priority=request.priority,
            )
            return ChildStarted(child=number, run_id=run_id, workflow=request.workflow)

        def answer(outcome: ChildStarted | ChildConflict) -> None:
            if isinstance(outcome, ChildStarted):
                self._started.add(outcome.run_id)
                future.set_result(outcome.run_id)
            else:
                future.set_exception(_refusal(outcome, self._world))

        started = self._recorder.ask(
            f"start({request.workflow!r})",
            ChildStarted,
            ChildConflict,
            new,
            lambda recorded: (
                isinstance(recorded, ChildConflict) or recorded.workflow == request.workflow
            ),
            answer,
        )
        self._next = max(self._next, started.child + 1)
        return await future

    def closed(self, event: ChildClosed) -> None:
        """Deliver a child's closing to whoever waits for it."""
        self._closed[event.run_id] = event
        for waiter in self._waiters.pop(event.run_id, []):
            if not waiter.done():
                waiter.set_result(None)

    async def result(self, run_id: str, fn: Any, timeout: float | None) -> Any:
        """Wait durably for child ``run_id`` to close (following continue-as-new)."""
        if timeout is None:
            return await self._outcome(run_id, fn)
        return await asyncio.wait_for(self._outcome(run_id, fn), timeout)

    async def _outcome(self, run_id: str, fn: Any) -> Any:
        if run_id not in self._started:
            raise NotInWorkflowError(
                f"run {run_id} is not a child of this run: workflow code waits durably only "
                "for runs it started; read other runs from a step"
            )
        while True:
            closed = self._closed.get(run_id)
            if closed is None:
                waiter: asyncio.Future[None] = self._loop.create_future()
                self._waiters.setdefault(run_id, []).append(waiter)
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
