"""Flow control in the memory world: slots at limited pairs and the line behind them.

A limited pair (attribute key, value) keeps its holders and its waiters, each
in arrival order, keyed by (run id, hold number): hold 0 is a start-time
``Limited`` slot, others are a workflow's ``hold()`` blocks. When a run closes
or a block exits, its rows go and ``slots.promote_flow`` decides whom that
admits; a promoted run is woken through the callback the world gives.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

import msgspec

from worlds._rules import slots
from worlds.semantics import index_value
from worlds.types import AttributeValue, ClaimConflict, CreateRunRequest, Slot, SlotRequested

__all__ = ["SlotStore"]


@dataclass
class _Pair:
    """A limited pair's rows: holders and waiters, each in arrival order."""

    holders: dict[slots.Waiter, Slot] = field(default_factory=dict)
    waiters: dict[slots.Waiter, Slot] = field(default_factory=dict)


def _slot_order(slot: Slot) -> tuple[bool, int]:
    """Holders first, then waiters, each in arrival order."""
    return (not slot.holding, slot.position)


class SlotStore:
    """The memory world's limited pairs, and which pairs each run stands at."""

    def __init__(self, wake: Callable[[str, int], None]) -> None:
        """``wake(run_id, hold)`` enqueues the workflow task of a run just given its
        slots (``hold`` 0: its start-time slots; else that ``hold()`` block's)."""
        self._wake = wake
        self._pairs: dict[tuple[str, str], _Pair] = {}
        self._run_pairs: dict[str, list[tuple[tuple[str, str], int]]] = {}
        """By run: each (pair, hold number) it holds a slot of or waits in."""
        self._positions = itertools.count(1)

    def release(self, run_id: str) -> None:
        """Drop the closed run's slots and places in line; promote whom that admits."""
        self._drop(run_id, self._run_pairs.pop(run_id, []))

    def release_hold(self, run_id: str, hold: int) -> None:
        """Drop hold ``hold`` of ``run_id`` (slot or place in line); promote whom that admits."""
        rows = self._run_pairs.get(run_id, [])
        gone = [(pair, number) for pair, number in rows if number == hold]
        self._run_pairs[run_id] = [row for row in rows if row[1] != hold]
        if not self._run_pairs[run_id]:
            del self._run_pairs[run_id]
        self._drop(run_id, gone)

    def _drop(self, run_id: str, rows: list[tuple[tuple[str, str], int]]) -> None:
        """Drop ``rows`` (pair, hold) of ``run_id``; promote whom that admits."""
        freed = []
        for pair, hold in rows:
            at = self._pairs[pair]
            at.holders.pop((run_id, hold), None)
            at.waiters.pop((run_id, hold), None)
            freed.append(pair)
        slots.drive(slots.promote_flow(freed), self._promotion_step)
        for pair in freed:
            left = self._pairs.get(pair)
            if left is not None and not left.holders and not left.waiters:
                del self._pairs[pair]

    def _promotion_step(self, need: slots.Need) -> object:
        match need:
            case slots.Head(pair=pair):
                rows = self._pairs.get(pair)
                return next(iter(rows.waiters), None) if rows is not None else None
            case slots.Views(run_id=run_id, hold=hold):
                views = []
                for pair, row_hold in self._run_pairs.get(run_id, []):
                    rows = self._pairs[pair]
                    slot = rows.waiters.get((run_id, hold))
                    if row_hold != hold or slot is None:
                        continue
                    first = next(iter(rows.waiters))
                    views.append(slots.PairView(pair, slot.limit, len(rows.holders), first))
                return views
            case slots.Promote(run_id=run_id, pairs=pairs, hold=hold):
                for pair in pairs:
                    rows = self._pairs[pair]
                    slot = rows.waiters.pop((run_id, hold))
                    rows.holders[(run_id, hold)] = msgspec.structs.replace(slot, holding=True)
                self._wake(run_id, hold)
                return None
            case _:
                assert_never(need)

    def move(self, old_run_id: str, new_run_id: str) -> None:
        """Hand the start-time slots ``old_run_id`` holds to ``new_run_id``
        (continue-as-new); its ``hold()`` blocks end with it."""
        rows = self._run_pairs.pop(old_run_id, [])
        moved = [(pair, hold) for pair, hold in rows if hold == 0]
        for pair, _ in moved:
            at = self._pairs[pair]
            slot = at.holders.pop((old_run_id, 0))
            at.holders[(new_run_id, 0)] = msgspec.structs.replace(slot, run_id=new_run_id)
        if moved:
            self._run_pairs[new_run_id] = moved
        self._drop(old_run_id, [(pair, hold) for pair, hold in rows if hold != 0])

    @staticmethod
    def _state(rows: _Pair) -> slots.PairState:
        someone = next(iter(rows.holders), None) or next(iter(rows.waiters), None)
        return slots.PairState(
            len(rows.holders), len(rows.waiters), None if someone is None else someone[0]
        )

    def acquire(self, run_id: str, event: SlotRequested) -> SlotRequested:
        """A ``hold``'s row at its pair: the slot if ``slots.admit_hold`` says so, else in line."""
        pair = (event.key, index_value(event.value))
        rows = self._pairs.setdefault(pair, _Pair())
        acquired = slots.admit_hold(self._state(rows), event.limit)
        slot = Slot(
            key=event.key,
            value=event.value,
            run_id=run_id,
            limit=event.limit,
            holding=acquired,
            position=next(self._positions),
            hold=event.hold,
        )
        (rows.holders if acquired else rows.waiters)[(run_id, event.hold)] = slot
        self._run_pairs.setdefault(run_id, []).append((pair, event.hold))
        return msgspec.structs.replace(event, acquired=acquired)

    def admit(self, request: CreateRunRequest) -> str | ClaimConflict:
        """``slots.admit`` over the request's limited pairs as they are now."""
        states = {}
        for key in request.limits:
            rows = self._pairs.get((key, index_value(request.attributes[key])), _Pair())
            states[key] = self._state(rows)
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
            (rows.holders if holding else rows.waiters)[(request.run_id, 0)] = slot
            self._run_pairs.setdefault(request.run_id, []).append((pair, 0))

    def at_pair(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        rows = self._pairs.get((key, index_value(value)), _Pair())
        return sorted([*rows.holders.values(), *rows.waiters.values()], key=_slot_order)

    def of_run(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        found = []
        for pair, hold in self._run_pairs.get(run_id, []):
            rows = self._pairs[pair]
            found.append(rows.holders.get((run_id, hold)) or rows.waiters[(run_id, hold)])
        return sorted(found, key=lambda slot: (slot.key, index_value(slot.value), slot.hold))
