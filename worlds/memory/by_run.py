"""A dict of the memory world that also knows which of its keys belong to each run.

The memory world's stores keep rows in dicts keyed by their own ids (a work
item's id, a hook's token, a claim's pair); many flows ask for one run's rows
(``drop_run``, ``dispose``, ``windowed``), which a plain dict answers only by
scanning every row: a bulk action over n runs was then n scans of n rows.
``ByRun`` keeps, beside the rows, the keys of each run's rows, updated by every
write (``__setitem__``, ``__delitem__``), so the ``Journal``'s writes and its
undos (which go through those same methods) keep the index exact, and one run's
rows cost what that run has.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, KeysView, MutableMapping, ValuesView
from typing import Any, Generic, TypeVar, overload

__all__ = ["ByRun"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_MISSING: Any = object()


class ByRun(MutableMapping[K, V], Generic[K, V]):
    """Rows by key, and each run's keys, in the order a dict would list them.

    Args:
        run_of: the run a row belongs to.
    """

    def __init__(self, run_of: Callable[[V], str]) -> None:
        self._rows: dict[K, V] = {}
        self._by_run: dict[str, dict[K, None]] = {}
        self._run_of = run_of

    def __getitem__(self, key: K) -> V:
        return self._rows[key]

    def __setitem__(self, key: K, value: V) -> None:
        old = self._rows.get(key, _MISSING)
        run_id = self._run_of(value)
        if old is not _MISSING and self._run_of(old) == run_id:
            self._rows[key] = value  # in place, as a dict keeps an updated key's position
            return
        if old is not _MISSING:
            self._unindex(key, old)
        self._rows[key] = value
        self._by_run.setdefault(run_id, {})[key] = None

    def __delitem__(self, key: K) -> None:
        self._unindex(key, self._rows.pop(key))

    def __iter__(self) -> Iterator[K]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    @overload
    def get(self, key: K, /) -> V | None: ...

    @overload
    def get(self, key: K, /, default: V | D) -> V | D: ...

    def get(self, key: K, /, default: object = None) -> object:
        return self._rows.get(key, default)

    def pop(self, key: K, /, default: Any = _MISSING) -> Any:
        if key not in self._rows:
            if default is _MISSING:
                raise KeyError(key)
            return default
        value = self._rows[key]
        del self[key]
        return value

    def keys(self) -> KeysView[K]:
        return self._rows.keys()

    def values(self) -> ValuesView[V]:
        return self._rows.values()

    def items(self) -> ItemsView[K, V]:
        return self._rows.items()

    def keys_of(self, run_id: str) -> list[K]:
        """The keys of ``run_id``'s rows in the dict's order (a copy: safe to write
        while going through it)."""
        return list(self._by_run.get(run_id, ()))

    def of(self, run_id: str) -> list[V]:
        """``run_id``'s rows in the dict's order."""
        return [self._rows[key] for key in self._by_run.get(run_id, ())]

    def _unindex(self, key: K, value: V) -> None:
        run_id = self._run_of(value)
        keys = self._by_run[run_id]
        del keys[key]
        if not keys:
            del self._by_run[run_id]
