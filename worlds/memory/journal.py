"""The memory world's undo journal: how its operations stay all-or-nothing.

A flow (``worlds._flows``) writes as it goes and may fail part-way (a claim
conflict, a taken run id); a database rolls the transaction back, the memory
world undoes its journal. Every write the memory world's rows make during an
operation goes through here and records how to undo itself; ``undo_to`` undoes
back to a mark (a savepoint, or the operation's start) in reverse order,
``forget`` keeps everything once the operation succeeded. Writes outside an
operation (leasing, renewing) need no journal: they cannot fail half-way.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

__all__ = ["Journal"]

K = TypeVar("K")
V = TypeVar("V")

_MISSING: Any = object()


class Journal:
    """Undo records of the writes since the last ``forget``."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def mark(self) -> int:
        """A point to undo back to."""
        return len(self._undo)

    def undo_to(self, mark: int) -> None:
        """Undo every write made since ``mark``, the latest first."""
        while len(self._undo) > mark:
            self._undo.pop()()

    def forget(self) -> None:
        """Keep every write made so far: nothing to undo any more."""
        self._undo.clear()

    def record(self, undo: Callable[[], None]) -> None:
        """Remember ``undo``, which undoes a write just made."""
        self._undo.append(undo)

    def put(self, mapping: MutableMapping[K, V], key: K, value: V) -> None:
        """``mapping[key] = value``, undoably."""
        old = mapping.get(key, _MISSING)
        mapping[key] = value
        self.record(lambda: _restore(mapping, key, old))

    def pop(self, mapping: MutableMapping[K, V], key: K) -> V | None:
        """Remove ``key`` from ``mapping`` (if there), undoably; its value."""
        old = mapping.pop(key, _MISSING)
        if old is _MISSING:
            return None
        self.record(lambda: mapping.__setitem__(key, old))
        value: V = old
        return value


def _restore(mapping: MutableMapping[K, V], key: K, old: Any) -> None:
    if old is _MISSING:
        mapping.pop(key, None)
    else:
        mapping[key] = old
