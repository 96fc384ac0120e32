"""Counting the calls a process makes of a world: ``CountedWorld`` wraps any world.

The memory world sends no statements, so what an idle worker costs it is the
world calls it makes; on the SQL worlds the calls show which poll the
statements came from. ``wait``, ``wait_idle`` and ``now`` are counted apart
(``waits``): they block or read the clock, and query nothing. Used by
``tests/api/test_idle_worker.py`` and ``benchmarks/idle_cost.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from worlds.protocol import World
from worlds.wrapper import WorldWrapper

__all__ = ["NOT_QUERIES", "CountedWorld"]

NOT_QUERIES = frozenset({"wait", "wait_idle", "now"})
"""World methods that query nothing: they wait for a signal or read the clock."""

_METHODS = frozenset(
    name for name, value in vars(WorldWrapper).items() if callable(value) and name[0] != "_"
)


class CountedWorld(WorldWrapper):
    """Forwards every ``World`` method and counts each call by name (``calls``)."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.calls: Counter[str] = Counter()

    def __getattribute__(self, name: str) -> Any:
        found = super().__getattribute__(name)
        if name not in _METHODS:
            return found
        calls: Counter[str] = super().__getattribute__("calls")

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return found(*args, **kwargs)

        return counted

    def queries(self) -> int:
        """The calls so far of methods that may query the world (all but ``NOT_QUERIES``)."""
        return sum(n for name, n in self.calls.items() if name not in NOT_QUERIES)
