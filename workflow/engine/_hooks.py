"""Hooks in workflow code: ``create_hook`` as a recorded command, payloads as events.

Creating a hook issues ``HookCreated``; the world claims its token in the
commit, or records ``HookConflict`` when another open run holds it (awaiting
the hook then raises ``HookConflictError``). Payloads arrive as external
``HookReceived`` events, in log order. A payload carried over by
continue-as-new names only its token (``hook`` 0) and waits for the hook this
run creates with that token.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any
from uuid import UUID

from workflow._attributes import check_count, check_pair, check_token
from workflow._codec import decode_result
from workflow._hooks import Hook
from workflow._run import Run
from workflow.engine._loop import WorkflowLoop
from workflow.engine._recorder import Recorder
from workflow.errors import HookConflictError
from worlds.protocol import World
from worlds.types import HookConflict, HookCreated, HookReceived

__all__ = ["Hooks", "WorkflowHook"]


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
        """Take a payload; the first waiting ``receive`` gets it."""
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


class Hooks:
    """One run's hooks: by number, the first one of each token, and early payloads."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop, world: World | None) -> None:
        self._recorder = recorder
        self._loop = loop
        self._world = world
        self._next = 1
        self._hooks: dict[int, WorkflowHook] = {}
        # by token, the first hook created with it, and payloads for tokens no hook has yet
        self._by_token: dict[str, WorkflowHook] = {}
        self._unclaimed: dict[str, list[bytes]] = {}

    def create(
        self,
        token: str | None,
        attributes: dict[str, Any] | None,
        new_uuid: Callable[[], UUID],
    ) -> Hook:
        """Create a hook (or match it against the log); ``new_uuid`` names a tokenless one."""
        checked = dict(check_pair(k, v) for k, v in (attributes or {}).items())
        check_count(len(checked))
        token = check_token(token) if token is not None else f"hook_{new_uuid().hex}"
        future: asyncio.Future[None] = self._loop.create_future()

        def answer(outcome: HookCreated | HookConflict) -> None:
            if isinstance(outcome, HookCreated):
                future.set_result(None)
            else:
                holder = Run[Any](outcome.holder_run_id, world=self._world)
                future.set_exception(HookConflictError(outcome.token, holder))

        created = self._recorder.ask(
            "create_hook",
            HookCreated,
            HookConflict,
            lambda: HookCreated(hook=self._next, token=token, attributes=checked),
            None,
            answer,
        )
        self._next = max(self._next, created.hook + 1)
        hook = WorkflowHook(created.token, future, self._loop)
        self._hooks[created.hook] = hook
        if created.token not in self._by_token:
            self._by_token[created.token] = hook
            for payload in self._unclaimed.pop(created.token, []):
                hook.deliver(payload)
        return hook

    def received(self, event: HookReceived) -> None:
        """Deliver a payload to its hook (or keep it for the hook of its token)."""
        if event.hook:
            hook = self._hooks.get(event.hook)
        else:  # carried over by continue-as-new; the hook may not exist yet
            hook = self._by_token.get(event.token)
            if hook is None:
                self._unclaimed.setdefault(event.token, []).append(event.payload)
        if hook is not None:
            hook.deliver(event.payload)

    def reads(self) -> dict[str, int]:
        """Payloads read per token, for ``RunContinued`` (the next run skips them)."""
        return {token: hook.read for token, hook in self._by_token.items()}
