"""``hold()`` in workflow code: durable semaphore blocks on the world's slot rows.

Entering a block issues a ``SlotRequested`` command. The world settles it in
the commit (``worlds._rules.slots.admit_hold``): ``acquired`` when a slot was
free, else the run waits in line and its workflow task ends; when a slot
frees, the world promotes the first waiter by appending ``SlotAcquired`` to
its log and waking it. Leaving the block issues ``SlotReleased`` (a command,
whatever the block's outcome, cancellation included); the world drops the row
in the same commit and promotes whom that admits. So replay answers every
step from the log: the recorded ``SlotRequested`` says whether the slot came
at once, and a later ``SlotAcquired`` is delivered in log order like any
other external event. A pair has one limit at a time: when its holders asked
another limit than this block's, the world refuses the request (``refused``,
no row written) and entering the block raises ``ValueError``.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from workflow.engine._loop import WorkflowLoop
from workflow.engine._recorder import Recorder
from worlds.semantics import index_value, slots
from worlds.types import AttributeValue, SlotAcquired, SlotReleased, SlotRequested

__all__ = ["HoldBlock", "Holds"]


class Holds:
    """One run's hold blocks: their numbers, the pairs in use and who waits."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop) -> None:
        self._recorder = recorder
        self._loop = loop
        self._next = 1
        self._pairs: dict[int, tuple[str, str]] = {}
        self._acquired: set[int] = set()
        self._waiters: dict[int, asyncio.Future[None]] = {}

    def block(self, key: str, value: AttributeValue, limit: int, priority: int = 0) -> HoldBlock:
        """The ``async with`` block of one ``hold`` call."""
        return HoldBlock(self, key, value, limit, priority)

    def acquired(self, event: SlotAcquired) -> None:
        """Deliver a promotion: the waiting block of ``event.hold`` enters."""
        self._acquired.add(event.hold)
        waiter = self._waiters.pop(event.hold, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def acquire(self, key: str, value: AttributeValue, limit: int, priority: int = 0) -> int:
        """Take a slot of (``key``, ``value``) or wait in line for one; the hold's number."""
        pair = (key, index_value(value))
        if pair in self._pairs.values():
            raise ValueError(
                f"this run already holds or waits for {key}={value!r}: a run holds a pair once "
                "at a time (a second hold of it could only deadlock); raise the limit or "
                "hold it once around both parts"
            )
        future: asyncio.Future[SlotRequested] = self._loop.create_future()
        requested = self._recorder.ask(
            f"hold({key!r}, {value!r})",
            SlotRequested,
            SlotRequested,
            lambda: SlotRequested(
                hold=self._next, key=key, value=value, limit=limit, priority=priority
            ),
            lambda recorded: (recorded.key, index_value(recorded.value)) == pair,
            future.set_result,
        )
        number = requested.hold
        self._next = max(self._next, number + 1)
        self._pairs[number] = pair
        try:
            answered = await future
            if answered.refused is not None:  # the pair is held with another limit
                self._pairs.pop(number, None)
                raise _RefusedError(slots.limit_clash(key, value, answered.refused, None, limit))
            if not answered.acquired and number not in self._acquired:
                waiter: asyncio.Future[None] = self._loop.create_future()
                self._waiters[number] = waiter
                await waiter
        except GeneratorExit:
            raise  # an evicted instance's body is closed: nothing to record
        except _RefusedError as refused:
            raise ValueError(str(refused)) from None  # no row, so nothing to give back
        except BaseException:
            self.release(number)  # a cancelled wait gives up its place in line
            raise
        return number

    def release(self, number: int) -> None:
        """Give back hold ``number`` (its slot or its place in line): a command."""
        self._pairs.pop(number, None)
        self._waiters.pop(number, None)
        self._recorder.record(
            "the end of a hold() block",
            SlotReleased,
            lambda: SlotReleased(hold=number),
            lambda recorded: recorded.hold == number,
        )


class _RefusedError(Exception):
    """The world refused a hold (its pair is held with another limit): no place to give back."""


class HoldBlock:
    """``async with hold(key, value, limit=n):`` in workflow code."""

    def __init__(
        self, holds: Holds, key: str, value: AttributeValue, limit: int, priority: int
    ) -> None:
        self._holds = holds
        self._key = key
        self._value = value
        self._limit = limit
        self._priority = priority
        self._number: int | None = None

    async def __aenter__(self) -> None:
        if self._number is not None:
            raise RuntimeError("a hold() block is entered once; call hold() again")
        self._number = await self._holds.acquire(
            self._key, self._value, self._limit, self._priority
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._number is not None
        if exc_type is not GeneratorExit:  # an evicted instance's body records nothing
            self._holds.release(self._number)
