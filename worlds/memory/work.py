"""The work queue of the memory world: workflow tasks, steps and timers, and their leases.

An item is keyed by ``work_item_id``, so a run has at most one workflow task.
A lease is an owner, a fencing token and an expiry; an expired lease can be
taken by the next ``lease``. The rows a flow writes (``add``, ``put``,
``update``, ``delete``, ``drop_run``) go through the world's ``Journal``;
leasing, renewing and releasing are whole operations of their own.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from worlds._flows.rows import Placement
from worlds.memory.by_run import ByRun
from worlds.memory.journal import Journal
from worlds.protocol import WORK_TOPIC
from worlds.semantics import lease_deadline
from worlds.types import NewWorkItem, StepStarted, WorkItem, WorkKind

__all__ = ["QueuedItem", "WorkQueue"]


@dataclass
class QueuedItem:
    """One queued work item and, while leased, who holds it until when."""

    id: str
    run_id: str
    kind: WorkKind
    name: str
    number: int
    attempt: int
    payload: bytes
    available_at: datetime
    owner: str | None = None
    token: int = 0
    expires_at: datetime | None = None
    rewake: bool = False
    ever_leased: bool = False


class WorkQueue:
    """The memory world's queued work items, keyed by id (``items``)."""

    def __init__(
        self,
        journal: Journal,
        signal: Callable[[str], None],
        started: Callable[[str, StepStarted, datetime], None],
    ) -> None:
        """``started`` records the ``StepStarted`` of a step leased for an attempt."""
        self._journal = journal
        self._signal = signal
        self._started = started
        self.items: ByRun[str, QueuedItem] = ByRun(lambda item: item.run_id)
        self._tokens = itertools.count(1)

    def new_token(self) -> int:
        """A fresh fencing token."""
        return next(self._tokens)

    # ------------------------------------------------------------ rows a flow writes

    def add(self, run_id: str, new: NewWorkItem, placed: Placement) -> bool:
        """Store ``placed`` unless an item has its id; False then."""
        if placed.item_id in self.items:
            return False
        self.put(run_id, new, placed)
        return True

    def put(self, run_id: str, new: NewWorkItem, placed: Placement) -> None:
        """Store ``placed``, replacing an item with its id."""
        item = QueuedItem(
            id=placed.item_id,
            run_id=run_id,
            kind=new.kind,
            name=placed.name,
            number=new.number,
            attempt=new.attempt,
            payload=new.payload,
            available_at=placed.available_at,
            owner=placed.owner,
            token=placed.token,
            expires_at=placed.expires_at,
            ever_leased=placed.leased is not None,
        )
        self._journal.put(self.items, item.id, item)

    def load(self, item: QueuedItem) -> None:
        """Store ``item`` as it is."""
        self._journal.put(self.items, item.id, item)

    def update(self, item_id: str, **changes: object) -> None:
        """Change fields of the item."""
        item = self.items[item_id]
        self._journal.put(self.items, item_id, dataclasses.replace(item, **changes))  # type: ignore[arg-type]

    def delete(self, item_id: str) -> None:
        """Delete the item."""
        self._journal.pop(self.items, item_id)

    def drop_run(self, run_id: str, kinds: Collection[str] | None = None) -> list[QueuedItem]:
        """Delete every item of ``run_id`` (of ``kinds`` only, if given); the items deleted."""
        dropped = [item for item in self.items.of(run_id) if kinds is None or item.kind in kinds]
        for item in dropped:
            self._journal.pop(self.items, item.id)
        return dropped

    # ------------------------------------------------------------ leases

    def _lease_item(
        self, item: QueuedItem, worker_id: str, now: datetime, seconds: float
    ) -> WorkItem:
        if item.kind == "step" and item.ever_leased:
            item.attempt += 1
        item.owner, item.token = worker_id, next(self._tokens)
        item.expires_at = lease_deadline(now, seconds)
        item.ever_leased, item.rewake = True, False
        if item.kind == "step":
            self._started(item.run_id, StepStarted(step=item.number, attempt=item.attempt), now)
        return WorkItem(
            id=item.id,
            run_id=item.run_id,
            kind=item.kind,
            name=item.name,
            number=item.number,
            attempt=item.attempt,
            payload=item.payload,
            token=item.token,
            lease_expires_at=item.expires_at,
        )

    def holds(self, lease: WorkItem, worker_id: str) -> QueuedItem | None:
        """The item ``lease`` names if ``worker_id`` still holds it under that token."""
        item = self.items.get(lease.id)
        if item is None or item.owner != worker_id or item.token != lease.token:
            return None
        return item

    def lease(
        self,
        worker_id: str,
        now: datetime,
        *,
        names: Collection[str],
        limit: int,
        lease_seconds: float,
        takeable: Callable[[str, datetime], bool],
        runnable: Callable[[str], bool] = lambda run_id: True,
    ) -> list[WorkItem]:
        """See ``World.lease``: items due at the same time in (run id, item id) order.
        An item whose lease ran out is taken only when ``takeable(owner, expired_at)``
        (``worlds._flows.liveness.lease_rights``); an item only when ``runnable(run_id)``
        (its run's build lets this worker lease it, RFC 0025)."""
        due = [
            item
            for item in self.items.values()
            if item.name in names
            and item.available_at <= now
            and (
                item.owner is None or (self._expired(item, now) and self._may_take(item, takeable))
            )
            and runnable(item.run_id)
        ]
        due.sort(key=lambda item: (item.available_at, item.run_id, item.id))
        return [self._lease_item(item, worker_id, now, lease_seconds) for item in due[:limit]]

    def expired_owners(self, now: datetime, names: Collection[str]) -> set[str]:
        """The holders of the items of ``names`` whose leases ran out by ``now``."""
        return {
            item.owner
            for item in self.items.values()
            if item.owner is not None and item.name in names and self._expired(item, now)
        }

    @staticmethod
    def _may_take(item: QueuedItem, takeable: Callable[[str, datetime], bool]) -> bool:
        assert item.owner is not None and item.expires_at is not None
        return takeable(item.owner, item.expires_at)

    @staticmethod
    def _expired(item: QueuedItem, now: datetime) -> bool:
        return item.expires_at is not None and item.expires_at <= now

    def renew(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float, now: datetime
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        alive = []
        for lease in items:
            item = self.holds(lease, worker_id)
            if item is not None:
                item.expires_at = lease_deadline(now, lease_seconds)
            alive.append(item is not None)
        return alive

    def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        for lease in items:
            item = self.holds(lease, worker_id)
            if item is not None:
                item.owner, item.expires_at = None, None
        self._signal(WORK_TOPIC)

    def next_due(self) -> datetime | None:
        """When the earliest item nobody holds becomes due; ``None`` if none waits."""
        waiting = [item.available_at for item in self.items.values() if item.owner is None]
        return min(waiting, default=None)

    def leasable_at(self, names: Collection[str]) -> datetime | None:
        """When the earliest item of ``names`` becomes leasable: a free one's due time,
        a leased one's expiry; ``None`` if there is none (an idle poll's memory)."""
        times = [
            item.available_at
            if item.owner is None or item.expires_at is None
            else max(item.expires_at, item.available_at)
            for item in self.items.values()
            if item.name in names
        ]
        return min(times, default=None)

    def waiting_runs(self, now: datetime) -> dict[str, set[str]]:
        """Runs whose workflow task or timer is due at ``now`` and unleased, by workflow."""
        found: dict[str, set[str]] = {}
        for item in self.items.values():
            if item.kind != "step" and item.owner is None and item.available_at <= now:
                found.setdefault(item.name, set()).add(item.run_id)
        return found

    def busy(self, now: datetime) -> bool:
        """True while some item is due at ``now`` or leased."""
        return any(
            item.available_at <= now or item.owner is not None for item in self.items.values()
        )
