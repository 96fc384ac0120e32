"""Pacing a long series of world writes so other workers' commits go between them.

A bulk action (``workflow._bulk``) or a background prune writes as fast as the
world lets it. On SQLite every write takes the file's one write lock, and a
process waiting for it polls (SQLite's busy handler sleeps 1, 2, 5, 10, 15,
20, 25 ms and more between tries), so a writer that takes the lock back to
back makes other processes' commits wait out whole sleeps. A ``Pacer`` keeps
each operation short and the world free long enough after it:

* **short holds**: the number of runs per operation follows what the last
  operation took per run, aiming at ``HOLD`` seconds an operation (never more
  than the caller's chunk, never fewer than one run, at most doubling at a
  time), so a chunk that outlasts its aim under load is cut at once;
* **long gaps**: after each operation it sleeps ``GAP_FACTOR`` times as long as
  the operation took, at least ``MIN_GAP`` (longer than the busy handler's
  first sleeps add up to, so a waiting commit finds the lock free on its next
  try) and at most ``MAX_GAP``. An operation that took long because others
  held the world (the commit latency it observed) pauses longer in turn. The
  floor is itself tied to what an operation takes (at most ``FLOOR_FACTOR``
  times it): a world whose operations take microseconds (the memory world)
  has no lock to free and is not slowed to ``MIN_GAP`` an operation.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import TypeVar

import anyio

__all__ = ["FLOOR_FACTOR", "GAP_FACTOR", "HOLD", "MAX_GAP", "MIN_GAP", "Pacer", "gap"]

HOLD = 0.01
"""Seconds one paced operation aims to take (and so to hold a write lock)."""
GAP_FACTOR = 1.5
"""The pause after an operation, as a multiple of the time it took."""
MIN_GAP = 0.025
"""Shortest pause after an operation, in seconds: a commit that waited out the
busy handler's first sleeps (1 + 2 + 5 + 10 ms) wakes within it."""
MAX_GAP = 0.25
"""Longest pause after an operation, in seconds."""
FLOOR_FACTOR = 10.0
"""The floor of the pause is at most this many times what the operation took."""

T = TypeVar("T")


class Pacer:
    """Sizes and spaces a series of world operations over many runs.

    Args:
        most: the most runs one operation may act on (the caller's chunk).
    """

    def __init__(self, most: int) -> None:
        if most < 1:
            raise ValueError(f"a pacer acts on at least one run at a time, not {most}")
        self._most = most
        self.size = 1
        """Runs the next operation should act on."""

    async def paced(self, operation: Awaitable[T], runs: int = 1) -> T:
        """``operation`` (acting on ``runs`` runs), then a pause; the next ``size`` set
        from what it took."""
        began = time.monotonic()
        result = await operation
        took = time.monotonic() - began
        per_run = took / max(1, runs)
        aimed = self._most if per_run <= 0 else int(HOLD / per_run)
        self.size = max(1, min(self._most, aimed, 2 * self.size))
        await anyio.sleep(gap(took))
        return result


def gap(took: float) -> float:
    """Seconds to pause after an operation that took ``took`` seconds."""
    floor = min(MIN_GAP, FLOOR_FACTOR * took)
    return min(max(GAP_FACTOR * took, floor), MAX_GAP)
