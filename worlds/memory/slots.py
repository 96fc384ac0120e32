"""Flow-control slots of the memory world: the rows of each limited pair.

A limited pair (attribute key, value) has a row per (run id, hold number):
hold 0 is a start-time ``Limited`` slot, others are a workflow's ``hold()``
blocks. A row holds a slot or waits in line; ``position`` orders arrivals.
These are the rows the flows (``worlds._flows.slots``) read and write through
``worlds.memory.rows``; writes go through the world's ``Journal``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import msgspec

from worlds._flows.rows import Pair, PairState, PairView, SlotRow, Waiter
from worlds.memory.journal import Journal
from worlds.semantics import index_value
from worlds.types import AttributeValue, Slot

__all__ = ["SlotStore"]


class SlotStore:
    """The memory world's limited pairs: ``Slot`` rows by pair, then by (run id, hold)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._pairs: dict[Pair, dict[Waiter, Slot]] = {}
        self._by_run: dict[str, dict[tuple[Pair, int], None]] = {}
        """Each run's rows as (pair, hold), so one run's rows are found without a scan
        of every pair (a bulk cancel closes many runs); journaled with the rows."""
        self._positions = itertools.count(1)
        self._floor = 0
        """The highest position loaded (``load``): new rows come after it."""

    def _next_position(self) -> int:
        position = next(self._positions)
        while position <= self._floor:
            position = next(self._positions)
        return position

    def _rows(self, pair: Pair) -> dict[Waiter, Slot]:
        rows = self._pairs.get(pair)
        if rows is None:
            rows = {}
            self._journal.put(self._pairs, pair, rows)
        return rows

    def _put(self, pair: Pair, row: Slot) -> None:
        self._journal.put(self._rows(pair), (row.run_id, row.hold), row)
        mine = self._by_run.get(row.run_id)
        if mine is None:
            mine = {}
            self._journal.put(self._by_run, row.run_id, mine)
        if (pair, row.hold) not in mine:
            self._journal.put(mine, (pair, row.hold), None)

    def _drop(self, pair: Pair, waiter: Waiter) -> None:
        rows = self._pairs[pair]
        self._journal.pop(rows, waiter)
        if not rows:  # the pair is gone with its last row (undone: back, then the row)
            self._journal.pop(self._pairs, pair)
        run_id, hold = waiter
        mine = self._by_run[run_id]
        self._journal.pop(mine, (pair, hold))
        if not mine:
            self._journal.pop(self._by_run, run_id)

    def _of(self, run_id: str) -> list[tuple[Pair, Slot]]:
        return [
            (pair, self._pairs[pair][(run_id, hold)])
            for pair, hold in list(self._by_run.get(run_id, ()))
        ]

    @staticmethod
    def _line(rows: dict[Waiter, Slot]) -> list[Slot]:
        return sorted((row for row in rows.values() if not row.holding), key=_in_line)

    # ------------------------------------------------------------ rows a flow reads and writes

    def state(self, pair: Pair) -> PairState:
        """The pair's holders and waiters, as admission needs them."""
        rows = self._pairs.get(pair, {})
        holders = sorted((row for row in rows.values() if row.holding), key=_by_position)
        line = self._line(rows)
        someone = holders[0] if holders else (line[0] if line else None)
        if someone is None:
            return PairState(len(holders), len(line), None)
        return PairState(len(holders), len(line), someone.run_id, someone.limit)

    def insert(self, slots: Sequence[SlotRow], *, holding: bool) -> None:
        """Store ``slots``, each after every row at its pair."""
        for slot in slots:
            row = Slot(
                key=slot.pair[0],
                value=slot.value,
                run_id=slot.run_id,
                limit=slot.limit,
                holding=holding,
                position=self._next_position(),
                hold=slot.hold,
                priority=slot.priority,
                burst=slot.burst,
            )
            self._put(slot.pair, row)

    def dump(self) -> list[tuple[Pair, Slot]]:
        """Every row, with its pair."""
        return [(pair, row) for pair, rows in self._pairs.items() for row in rows.values()]

    def load(self, pair: Pair, row: Slot) -> None:
        """Store ``row`` as it is, its position kept; later arrivals come after it."""
        self._put(pair, row)
        self._floor = max(self._floor, row.position)

    def drop(self, run_id: str, holds: set[int] | None = None) -> list[Pair]:
        """Drop ``run_id``'s rows (of ``holds`` only, if given); their pairs."""
        freed = []
        for pair, row in self._of(run_id):
            if holds is None or row.hold in holds:
                self._drop(pair, (run_id, row.hold))
                freed.append(pair)
        return freed

    def holds_of(self, run_id: str) -> set[int]:
        """The hold numbers ``run_id`` has rows of."""
        return {row.hold for _, row in self._of(run_id)}

    def first_waiter(self, pair: Pair) -> Waiter | None:
        """The first row in line at ``pair``."""
        line = self._line(self._pairs.get(pair, {}))
        return None if not line else (line[0].run_id, line[0].hold)

    def views(self, run_id: str, hold: int) -> list[PairView]:
        """A view of every pair where (``run_id``, ``hold``) waits."""
        views = []
        for pair, row in self._of(run_id):
            if row.hold != hold or row.holding:
                continue
            rows = self._pairs[pair]
            holding = sum(1 for other in rows.values() if other.holding)
            first = self._line(rows)[0]
            head = (first.run_id, first.hold)
            views.append(PairView(pair, row.limit, holding, head, row.burst))
        return views

    def promote(self, run_id: str, hold: int) -> None:
        """The waiting rows of (``run_id``, ``hold``) take their slots."""
        for pair, row in self._of(run_id):
            if row.hold == hold and not row.holding:
                self._put(pair, msgspec.structs.replace(row, holding=True))

    def carry(self, old_run_id: str, new_run_id: str) -> None:
        """Hand ``old_run_id``'s rows to ``new_run_id``."""
        for pair, row in self._of(old_run_id):
            self._drop(pair, (old_run_id, row.hold))
            self._put(pair, msgspec.structs.replace(row, run_id=new_run_id))

    def key_held(self, key: str) -> tuple[int, str | None]:
        """The start-time slots held at every value of ``key``, and one holder."""
        held = [
            row
            for (k, _), rows in self._pairs.items()
            if k == key
            for row in rows.values()
            if row.holding and row.hold == 0
        ]
        return len(held), min((row.run_id for row in held), default=None)

    def key_waiting(self, key: str) -> list[tuple[str, Slot, int]]:
        """Each value of ``key`` with rows in line: its index text, its first row in
        line and the slots held at its pair, by value."""
        found = []
        for (k, ivalue), rows in sorted(self._pairs.items()):
            line = self._line(rows) if k == key else []
            if line:
                found.append((ivalue, line[0], sum(1 for row in rows.values() if row.holding)))
        return found

    def head_at(self, pair: Pair) -> tuple[Slot, int] | None:
        """The first row in line at ``pair`` and the slots held there (``None``: nobody
        is in line)."""
        rows = self._pairs.get(pair, {})
        line = self._line(rows)
        if not line:
            return None
        return line[0], sum(1 for row in rows.values() if row.holding)

    # ------------------------------------------------------------ the world's reads

    def at_pair(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``: holders, then waiters, each in arrival order."""
        rows = self._pairs.get((key, index_value(value)), {})
        holders = sorted((row for row in rows.values() if row.holding), key=_by_position)
        return holders + self._line(rows)

    def of_key(self, key: str, limit: int) -> list[Slot]:
        """See ``World.list_key_slots``."""
        found: list[Slot] = []
        for pair_key, ivalue in sorted(pair for pair in self._pairs if pair[0] == key):
            rows = self._pairs[(pair_key, ivalue)]
            found += sorted((row for row in rows.values() if row.holding), key=_by_position)
            found += self._line(rows)
        return found[:limit]

    def of_run(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        found = [row for _, row in self._of(run_id)]
        return sorted(found, key=lambda slot: (slot.key, index_value(slot.value), slot.hold))


def _by_position(slot: Slot) -> int:
    return slot.position


def _in_line(slot: Slot) -> tuple[int, int]:
    """A waiter's place: lowest priority number first, then first in."""
    return slot.priority, slot.position
