"""What a workflow instance hands the engine and keeps pending: its outbox.

``Commit`` is the outbox (events, work and the child runs to create first);
``PendingCall`` a call answered at the next quiescent point once its outcome
is known; ``WorkflowHook`` a hook as workflow code sees it.
"""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from workflow._codec import decode_result
from workflow._hooks import Hook
from workflow.engine._loop import WorkflowLoop
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ChildConflict,
    ChildStarted,
    CreateRunRequest,
    EventKind,
    HookConflict,
    HookCreated,
    NewWorkItem,
    SlotRequested,
)

__all__ = ["LATEST_TIMER", "Commit", "Outcome", "PendingCall", "WorkflowHook"]

LATEST_TIMER = datetime(9000, 1, 1, tzinfo=UTC).timestamp()
"""Timers due later (``sleep(1e12)``, ``wait_for(x, timeout=inf)``) are clamped
to this: they never fire in practice, and every world can store the time."""


Outcome = (
    AttributeSet
    | AttributeConflict
    | HookCreated
    | HookConflict
    | ChildStarted
    | ChildConflict
    | SlotRequested
)


@dataclass
class PendingCall:
    """A ``set_attribute``, ``create_hook`` or child ``start`` waiting to be resolved at a
    quiescent point."""

    future: asyncio.Future[Any]
    outcome: Outcome | None
    outbox_index: int = -1


class WorkflowHook(Hook):
    """A hook inside a workflow: payloads arrive as ``HookReceived`` events."""

    def __init__(self, token: str, created: asyncio.Future[None], loop: WorkflowLoop) -> None:
        self.token = token
        self.read = 0
        self._created = created
        self._loop = loop
        self._payloads: collections.deque[bytes] = collections.deque()
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def deliver(self, payload: bytes) -> None:
        self._payloads.append(payload)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    async def receive(self) -> Any:
        """The next payload; ``HookConflictError`` if another run holds the token."""
        await self._created
        while not self._payloads:
            waiter = self._loop.create_future()
            self._waiters.append(waiter)
            await waiter
        self.read += 1
        return decode_result(self._payloads.popleft(), None)


@dataclass
class Commit:
    """What the instance asks the engine to write next."""

    events: list[EventKind] = field(default_factory=list)
    schedule: list[NewWorkItem] = field(default_factory=list)
    children: dict[int, CreateRunRequest] = field(default_factory=dict)
    """The child runs to create before committing, by the number of their ``ChildStarted``."""
