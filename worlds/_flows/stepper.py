"""Running a flow to its end in one step, on a backend whose rows never wait.

A flow is a coroutine over the rows port. Over SQLite's write transaction or
the memory world's dictionaries no port method suspends, so the coroutine
finishes on its first ``send``: ``run_sync`` drives it so, synchronously. If it
suspends instead, something in it would really wait (a port method that
awaits, a flow awaiting outside its port): SQLite would give the event loop
away while holding its file's write lock, the memory world would stop being
atomic. That is a bug, reported at once, never worked around.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(flow: Coroutine[Any, Any, T]) -> T:
    """Run ``flow`` to its end synchronously and return its result.

    Its exceptions propagate as they are.

    Raises:
        AssertionError: the flow suspended (it is closed first).
    """
    try:
        yielded = flow.send(None)
    except StopIteration as stop:
        result: T = stop.value
        return result
    flow.close()
    raise AssertionError(
        f"a flow suspended ({yielded!r}) over rows that must never wait: "
        "a port method or the flow awaited something that yields"
    )
