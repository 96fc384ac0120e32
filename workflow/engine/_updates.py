"""Updates in workflow code: requests arrive as events, answers are recorded commands.

The world appends ``UpdateReceived`` once per update id; the instance routes
it here and the update waits, by name, for the body's ``receive_updates(name)``
(updates sent before the body asks for their name wait for it, in log order).
``update.reply(value)`` records ``UpdateReplied`` and ``update.reject(message)``
records ``UpdateRejected``: commands matched by position on replay like any
other, so the answer callers read from the log is the one the body gave. An
update is answered once; a second answer raises ``RuntimeError``.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator

from workflow._updates import Update
from workflow.engine._loop import WorkflowLoop
from workflow.engine._recorder import Recorder
from worlds.types import UpdateReceived, UpdateRejected, UpdateReplied

__all__ = ["Updates"]


class _Receiver(AsyncIterator[Update]):
    """``receive_updates(name)``: the next update of ``name`` on each ``__anext__``."""

    def __init__(self, updates: Updates, name: str) -> None:
        self._updates = updates
        self._name = name

    def __aiter__(self) -> AsyncIterator[Update]:
        return self

    async def __anext__(self) -> Update:
        return await self._updates.next(self._name)


class Updates:
    """One run's updates: those not taken yet, by name, and the ids answered."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop) -> None:
        self._recorder = recorder
        self._loop = loop
        self._waiting: dict[str, collections.deque[Update]] = {}
        self._takers: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self._answered: set[str] = set()

    def receive(self, name: str) -> AsyncIterator[Update]:
        """The updates of ``name``, in log order (``receive_updates``)."""
        return _Receiver(self, name)

    async def next(self, name: str) -> Update:
        """The next update of ``name``, once the log holds one."""
        waiting = self._waiting.setdefault(name, collections.deque())
        while not waiting:
            taker = self._loop.create_future()
            self._takers.setdefault(name, collections.deque()).append(taker)
            await taker
        return waiting.popleft()

    def received(self, event: UpdateReceived) -> None:
        """An update arrived: it waits for its name's first taker."""
        update = Update(event.name, event.update_id, event.payload, self._answer)
        self._waiting.setdefault(event.name, collections.deque()).append(update)
        takers = self._takers.get(event.name)
        while takers:
            taker = takers.popleft()
            if not taker.done():
                taker.set_result(None)
                break

    def _answer(self, update_id: str, result: bytes | None, message: str | None) -> None:
        """Record the body's answer to ``update_id`` (or match it against the log)."""
        if update_id in self._answered:
            raise RuntimeError(f"update {update_id!r} was answered already")
        self._answered.add(update_id)
        if result is not None:
            self._recorder.record(
                f"reply to update {update_id!r}",
                UpdateReplied,
                lambda: UpdateReplied(update_id=update_id, result=result),
                lambda recorded: recorded.update_id == update_id,
            )
        else:
            assert message is not None, "an answer is a reply or a rejection"
            self._recorder.record(
                f"reject update {update_id!r}",
                UpdateRejected,
                lambda: UpdateRejected(update_id=update_id, message=message),
                lambda recorded: recorded.update_id == update_id,
            )
