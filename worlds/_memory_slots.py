"""Flow control in the memory world: slots at limited pairs and the line behind them.

A limited pair (attribute key, value) keeps its holders and its waiters, each
in arrival order. When a run closes, its rows go and ``slots.promote_flow``
decides whom that admits; a promoted run is woken through the callback the
world gives.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

import msgspec

from worlds._rules import slots
from worlds.semantics import index_value
from worlds.types import AttributeValue, ClaimConflict, CreateRunRequest, Slot

__all__ = ["SlotStore"]


@dataclass
class _Pair:
    """A limited pair's rows: holders and waiters, each in arrival order."""

    holders: dict[str, Slot] = field(default_factory=dict)
    waiters: dict[str, Slot] = field(default_factory=dict)


def _slot_order(slot: Slot) -> tuple[bool, int]:
    """Holders first, then waiters, each in arrival order."""
    return (not slot.holding, slot.position)


class SlotStore:
    """The memory world's limited pairs, and which pairs each run stands at."""

    def __init__(self, wake: Callable[[str], None]) -> None:
        """``wake(run_id)`` enqueues the workflow task of a run just given its slots."""
        self._wake = wake
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._run_pairs: dict[str, list[tuple[str, str]]] = {}
        self._positions = itertools.count(1)

    def release(self, run_id: str) -> None:
        """Drop the closed run's slots and places in line; promote whom that admits."""
        freed = self._run_pairs.pop(run_id, [])
        for pair in freed:
            rows = self._pairs[pair]
            rows.holders.pop(run_id, None)
            rows.waiters.pop(run_id, None)
        slots.drive(slots.promote_flow(freed), self._promotion_step)
        for pair in freed:
            if not self._pairs[pair].holders and not self._pairs[pair].waiters:
                del self._pairs[pair]

    def _promotion_step(self, need: slots.Need) -> object:
        match need:
            case slots.Head(pair=pair):
                rows = self._pairs.get(pair)
                return next(iter(rows.waiters), None) if rows is not None else None
            case slots.Views(run_id=run_id):
                views = []
                for pair in self._run_pairs.get(run_id, []):
                    rows = self._pairs[pair]
                    slot = rows.waiters[run_id]
                    first = next(iter(rows.waiters))
                    views.append(slots.PairView(pair, slot.limit, len(rows.holders), first))
                return views
            case slots.Promote(run_id=run_id, pairs=pairs):
                for pair in pairs:
                    rows = self._pairs[pair]
                    slot = rows.waiters.pop(run_id)
                    rows.holders[run_id] = msgspec.structs.replace(slot, holding=True)
                self._wake(run_id)
                return None
            case _:
                assert_never(need)

    def move(self, old_run_id: str, new_run_id: str) -> None:
        """Hand the slots ``old_run_id`` holds to ``new_run_id`` (continue-as-new)."""
        moved = self._run_pairs.pop(old_run_id, [])
        for pair in moved:
            rows = self._pairs[pair]
            slot = rows.holders.pop(old_run_id)
            rows.holders[new_run_id] = msgspec.structs.replace(slot, run_id=new_run_id)
        if moved:
            self._run_pairs[new_run_id] = moved

    def admit(self, request: CreateRunRequest) -> str | ClaimConflict:
        """``slots.admit`` over the request's limited pairs as they are now."""
        states = {}
        for key in request.limits:
            rows = self._pairs.get((key, index_value(request.attributes[key])), _Pair())
            someone = next(iter(rows.holders), None) or next(iter(rows.waiters), None)
            states[key] = slots.PairState(len(rows.holders), len(rows.waiters), someone)
        return slots.admit(request, states)

    def take(self, request: CreateRunRequest, *, holding: bool) -> None:
        """The new run's row at each of its limited pairs: a slot, or a place in line."""
        position = next(self._positions)
        for key, limit in sorted(request.limits.items()):
            value = request.attributes[key]
            pair = (key, index_value(value))
            slot = Slot(
                key=key,
                value=value,
                run_id=request.run_id,
                limit=limit.limit,
                holding=holding,
                position=position,
            )
            rows = self._pairs.setdefault(pair, _Pair())
            (rows.holders if holding else rows.waiters)[request.run_id] = slot
            self._run_pairs.setdefault(request.run_id, []).append(pair)

    def at_pair(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        rows = self._pairs.get((key, index_value(value)), _Pair())
        return sorted([*rows.holders.values(), *rows.waiters.values()], key=_slot_order)

    def of_run(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        found = []
        for pair in self._run_pairs.get(run_id, []):
            rows = self._pairs[pair]
            found.append(rows.holders.get(run_id) or rows.waiters[run_id])
        return sorted(found, key=lambda slot: (slot.key, index_value(slot.value)))
