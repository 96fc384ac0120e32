"""A run's attributes in workflow code: ``set_attribute`` as a recorded command.

The values start as ``RunCreated`` gave them and change only as the body's
``AttributeSet`` commands are answered, so they are the run's attributes as of
the body's position in the log. A plain set answers at once; a unique claim
is answered by the world in the commit (``AttributeSet`` or
``AttributeConflict``); replay answers from the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from workflow._attributes import ALWAYS_UNIQUE, check_count, check_settable
from workflow._run import Run
from workflow.engine._loop import WorkflowLoop
from workflow.engine._recorder import Recorder
from workflow.errors import AttributeConflictError
from worlds.protocol import World
from worlds.types import AttributeConflict, AttributeSet, AttributeValue, ReuseWindow

__all__ = ["RunAttributes"]


class RunAttributes:
    """One run's attributes, as the body sees them."""

    def __init__(self, recorder: Recorder, loop: WorkflowLoop, world: World | None) -> None:
        self._recorder = recorder
        self._loop = loop
        self._world = world
        self.values: dict[str, AttributeValue] = {}

    def start(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Take the attributes the run was created with."""
        self.values = dict(attributes)

    async def set(
        self, key: str, value: Any, unique: bool, window: ReuseWindow | None
    ) -> AttributeValue:
        """Set a run attribute; recorded, and answered from the log on replay."""
        if callable(value):
            value = value(self.values.get(key))
        key, checked = check_settable(key, value)
        if key not in self.values:
            check_count(len(self.values) + 1)
        unique = unique or key in ALWAYS_UNIQUE
        future: asyncio.Future[AttributeValue] = self._loop.create_future()

        def new() -> AttributeSet:
            reuse = window or ReuseWindow()
            return AttributeSet(
                key=key,
                value=checked,
                unique=unique,
                ttl=reuse.ttl,
                release_on=reuse.release_on,
            )

        def answer(outcome: AttributeSet | AttributeConflict) -> None:
            if isinstance(outcome, AttributeSet):
                self.values[outcome.key] = outcome.value
                future.set_result(outcome.value)
            else:
                holder = Run[Any](outcome.holder_run_id, world=self._world)
                future.set_exception(AttributeConflictError(outcome.key, outcome.value, holder))

        self._recorder.ask(
            f"set_attribute({key!r})",
            AttributeSet,
            AttributeConflict,
            new,
            lambda recorded: recorded.key == key,
            answer,
            answered=not unique,
        )
        return await future
