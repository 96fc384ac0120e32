"""``set_key_limit`` and ``get_key_limit``: a cap over every value of one key.

A key limit caps the open runs that hold a ``Limited`` slot of any value of a
key (``tenant``, say): a run then needs a slot of its pair and one of the key.
Freed key slots go to the waiting values weighted round-robin, so one tenant
with thousands of queued runs cannot starve the others. The world decides it
(``World.set_key_limit``, rfcs/0008-flow-control.md section 9).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from workflow._world_resolution import resolve_world
from worlds.protocol import World
from worlds.types import KeyLimit as StoredKeyLimit

__all__ = ["KeyLimit", "get_key_limit", "set_key_limit"]


@dataclass(frozen=True, slots=True, eq=False)
class KeyLimit:
    """A key's limit as ``get_key_limit`` reads it.

    ``limit`` caps the open runs holding a ``Limited`` slot of any value of ``key``;
    ``weights`` maps a value to its share of freed slots (1 when absent); ``held``
    is how many slots of the key were held when it was read. It compares equal to
    another ``KeyLimit`` with the same key, limit and weights, and to the int
    ``limit`` itself, so ``await get_key_limit("tenant") == 10`` reads naturally.
    """

    key: str
    limit: int
    weights: Mapping[Any, float] = field(default_factory=dict)
    held: int = 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyLimit):
            return (self.key, self.limit, dict(self.weights)) == (
                other.key,
                other.limit,
                dict(other.weights),
            )
        if isinstance(other, int) and not isinstance(other, bool):
            return self.limit == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.key, self.limit))

    def __int__(self) -> int:
        return self.limit


def _view(stored: StoredKeyLimit | None) -> KeyLimit | None:
    if stored is None:
        return None
    weights = {value: weight for value, weight in stored.weights}
    return KeyLimit(stored.key, stored.limit, weights, stored.held)


async def set_key_limit(
    key: str,
    limit: int | None,
    *,
    weights: Mapping[Any, float] | None = None,
    world: World | None = None,
) -> KeyLimit | None:
    """Cap the open runs that hold a ``Limited`` slot of any value of ``key``.

    ``await set_key_limit("tenant", 10)``: at most 10 runs hold a slot of any
    ``tenant`` value at once, each still within its own pair's limit. A run needs
    a slot of its pair and one of the key; when key slots free, the values with
    runs waiting are served weighted round-robin (``weights[value]``, 1 when
    absent), so a value with 10,000 waiting runs and a value with one both make
    progress. ``Limited(value, n, burst=m)`` lets a pair take up to ``m`` slots
    above ``n`` while the key has free capacity. Raising or removing a limit
    (``limit=None``) starts the waiting runs it admits at once; lowering it
    below the slots held takes none away (no new run starts until fewer hold).
    ``hold()`` blocks are not counted: they are inside runs that already hold
    their key slot.

    Returns:
        The limit stored, or ``None`` once removed.

    Raises:
        ValueError, TypeError: a key that is no attribute key (or reserved), a limit
            that is not 1-1000000, or a weight that is not a number 0.001-1000000;
            nothing was written.
    """
    stored = await resolve_world(world).set_key_limit(key, limit, weights)
    return _view(stored)


async def get_key_limit(key: str, *, world: World | None = None) -> KeyLimit | None:
    """The limit of ``key`` (``set_key_limit``) and the slots held now, or ``None``."""
    return _view(await resolve_world(world).get_key_limit(key))
