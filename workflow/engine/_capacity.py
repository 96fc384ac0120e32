"""How much more work a worker takes: its slots, what is in flight, what is promised.

A worker runs at most ``concurrency`` work items at once. Besides the items in
flight, slots are *reserved* for work that is on its way: the items a lease
asks the world for, the steps an eager commit leases straight back, the first
task of a run being started in this process. So a lease and an eager commit in
flight at the same time cannot overfill the worker. Once the worker stops it
takes nothing new.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from contextlib import contextmanager

import anyio
import msgspec

from worlds.types import NewWorkItem, WorkItem

__all__ = ["Capacity"]


class Capacity:
    """One worker's slots: items in flight with their cancel scopes, and reservations."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.stopping = False
        """Set once the worker stops: no new work, no eager work."""
        self._in_flight: dict[str, tuple[WorkItem, anyio.CancelScope]] = {}
        self._reserved = 0
        self._reserved_by: dict[str, int] = {}
        self._leasing = 0
        self._room = anyio.Event()

    # ------------------------------------------------------------ slots

    def free(self) -> int:
        """Slots neither in flight nor reserved (negative when overcommitted)."""
        return self.concurrency - len(self._in_flight) - self._reserved

    def stop(self) -> None:
        """Take nothing new from now on; wake whoever waits for room."""
        self.stopping = True
        self._room.set()

    def changed(self) -> None:
        """Slots were given back: wake whoever waits for room."""
        self._room.set()

    async def wait_for_room(self) -> None:
        """Return once some slot may have freed (or the worker stops)."""
        self._room = anyio.Event()
        await self._room.wait()

    @contextmanager
    def leasing(self, slots: int) -> Iterator[None]:
        """Reserve ``slots`` while a lease for that many items is with the world;
        runs started here meanwhile may take them (``reserve_start``)."""
        self._reserved += slots
        self._leasing = slots
        try:
            yield
        finally:
            self._reserved -= slots
            self._leasing = 0

    def reserve_start(self) -> bool:
        """Reserve a slot for the first task of a run started here; False if none is left."""
        if self.stopping or self.free() + self._leasing <= 0:
            return False
        self._reserved += 1
        return True

    def reserve(self, slots: int) -> None:
        """Reserve ``slots`` more (the steps a run started here leases straight back)."""
        self._reserved += slots

    def unreserve(self, slots: int) -> None:
        """Give back ``slots`` reserved by ``reserve_start`` and ``reserve``."""
        self._reserved -= slots

    def reserve_for(self, item: WorkItem, slots: int) -> None:
        """Reserve ``slots`` for items a commit under ``item`` may lease, until they run."""
        self._reserved += slots
        self._reserved_by[item.id] = self._reserved_by.get(item.id, 0) + slots

    def mark_eager(
        self, schedule: list[NewWorkItem], steps: Container[str]
    ) -> tuple[tuple[NewWorkItem, ...], int]:
        """Ask for the new steps this worker can start now (``lease=True``); return
        the schedule and the extra slots they need (the first one continues in
        the slot of the item whose commit leases them). ``steps``: the names of
        the steps this worker runs."""
        budget = 0 if self.stopping else self.free() + 1
        marked = []
        eager = 0
        for new in schedule:
            if eager < budget and new.kind == "step" and new.name in steps:
                new = msgspec.structs.replace(new, lease=True)
                eager += 1
            marked.append(new)
        return tuple(marked), max(eager - 1, 0)

    # ------------------------------------------------------------ in flight

    def start(self, item: WorkItem) -> None:
        """``item`` runs now, in a slot of its own."""
        self._in_flight[item.id] = (item, anyio.CancelScope())

    def scope(self, item: WorkItem) -> anyio.CancelScope:
        """The cancel scope of ``item``, in flight."""
        return self._in_flight[item.id][1]

    def finish(self, item: WorkItem) -> None:
        """``item`` is done: its slot and what was reserved for it are free again
        (unless its id was leased again, a retry of the same step, and the entry
        is the newer lease's)."""
        entry = self._in_flight.get(item.id)
        if entry is not None and entry[0].token == item.token:
            del self._in_flight[item.id]
        self._reserved -= self._reserved_by.pop(item.id, 0)

    @property
    def busy(self) -> bool:
        """Whether any item is in flight."""
        return bool(self._in_flight)

    def in_flight(self) -> list[tuple[WorkItem, anyio.CancelScope]]:
        """The items in flight and their cancel scopes."""
        return list(self._in_flight.values())
