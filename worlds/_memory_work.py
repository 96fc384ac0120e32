"""The work queue of the memory world: workflow tasks, steps and timers, and their leases.

An item is keyed by ``work_item_id``, so a run has at most one workflow task:
enqueuing another while a worker holds it marks it for a rewake instead. A
lease is an owner, a fencing token and an expiry; an expired lease can be
taken by the next ``lease``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from worlds.protocol import WORK_TOPIC
from worlds.semantics import lease_deadline, work_item_id
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
        signal: Callable[[str], None],
        workflow_of: Callable[[str], str],
        started: Callable[[str, StepStarted, datetime], None],
    ) -> None:
        """``workflow_of(run_id)`` names a run's workflow (a workflow task's name);
        ``started`` records the ``StepStarted`` of a step leased for an attempt."""
        self._signal = signal
        self._workflow_of = workflow_of
        self._started = started
        self.items: dict[str, QueuedItem] = {}
        self._tokens = itertools.count(1)

    def drop(self, run_id: str) -> None:
        """Forget every item of ``run_id``."""
        for item_id in [i.id for i in self.items.values() if i.run_id == run_id]:
            del self.items[item_id]

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

    def enqueue(
        self, run_id: str, new: NewWorkItem, worker_id: str, now: datetime, seconds: float
    ) -> WorkItem | None:
        """Queue ``new`` for ``run_id``; leased to ``worker_id`` at once if it asks and is due."""
        item_id = work_item_id(run_id, new)
        available_at = new.available_at or now
        existing = self.items.get(item_id)
        if existing is not None and new.kind == "workflow":
            if existing.owner is not None and existing.expires_at and existing.expires_at > now:
                existing.rewake = True
                return None
            existing.available_at = min(existing.available_at, available_at)
            item = existing
        else:
            item = QueuedItem(
                id=item_id,
                run_id=run_id,
                kind=new.kind,
                name=self._workflow_of(run_id) if new.kind == "workflow" else new.name,
                number=new.number,
                attempt=new.attempt,
                payload=new.payload,
                available_at=available_at,
            )
            self.items[item_id] = item
        if new.lease and item.available_at <= now:
            return self._lease_item(item, worker_id, now, seconds)
        self._signal(WORK_TOPIC)
        return None

    def holds(self, lease: WorkItem, worker_id: str, now: datetime) -> QueuedItem | None:
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
    ) -> list[WorkItem]:
        """See ``World.lease``."""
        due = [
            item
            for item in self.items.values()
            if item.name in names
            and item.available_at <= now
            and (item.owner is None or (item.expires_at is not None and item.expires_at <= now))
        ]
        due.sort(key=lambda item: item.available_at)
        return [self._lease_item(item, worker_id, now, lease_seconds) for item in due[:limit]]

    def renew(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float, now: datetime
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        alive = []
        for lease in items:
            item = self.holds(lease, worker_id, now)
            if item is not None:
                item.expires_at = lease_deadline(now, lease_seconds)
            alive.append(item is not None)
        return alive

    def release(self, worker_id: str, items: Sequence[WorkItem], now: datetime) -> None:
        """See ``World.release``."""
        for lease in items:
            item = self.holds(lease, worker_id, now)
            if item is not None:
                item.owner, item.expires_at = None, None
        self._signal(WORK_TOPIC)

    def next_due(self) -> datetime | None:
        """When the earliest item nobody holds becomes due; ``None`` if none waits."""
        waiting = [item.available_at for item in self.items.values() if item.owner is None]
        return min(waiting, default=None)

    def busy(self, now: datetime) -> bool:
        """True while some item is due at ``now`` or leased."""
        return any(
            item.available_at <= now or item.owner is not None for item in self.items.values()
        )
