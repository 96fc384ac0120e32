"""Where a new work item goes, and whether the worker that enqueues it takes it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from worlds.types import NewWorkItem, RunRecord, StepStarted, WorkItem

__all__ = ["Placement", "place"]


class Placement(NamedTuple):
    """A new item's row, and its lease when the enqueuing worker takes it at once.

    ``owner``, ``token`` and ``expires_at`` are what the row stores: the
    worker, its token and the lease's end when ``leased`` is set; ``None``,
    ``0`` and ``None`` otherwise. ``started`` is the ``StepStarted`` a step
    leased at once appends to its run.
    """

    item_id: str
    name: str
    available_at: datetime
    owner: str | None
    token: int
    expires_at: datetime | None
    leased: WorkItem | None
    started: StepStarted | None


def place(
    run: RunRecord,
    item_id: str,
    new: NewWorkItem,
    *,
    now: datetime,
    worker_id: str,
    lease_seconds: float,
    new_token: Callable[[], int],
) -> Placement:
    """Place ``new``, item ``item_id`` of ``run``: leased at once when it asks and is due.

    A workflow item is named after the run's workflow. The caller stores the
    row, or merges it into the run's existing workflow item (which this rule
    does not see).
    """
    name = run.workflow if new.kind == "workflow" else new.name
    available_at = new.available_at or now
    if not (new.lease and available_at <= now):
        return Placement(item_id, name, available_at, None, 0, None, None, None)
    token, expires_at = new_token(), now + timedelta(seconds=lease_seconds)
    leased = WorkItem(
        id=item_id,
        run_id=run.id,
        kind=new.kind,
        name=name,
        number=new.number,
        attempt=new.attempt,
        payload=new.payload,
        token=token,
        lease_expires_at=expires_at,
    )
    started = StepStarted(step=new.number, attempt=new.attempt) if new.kind == "step" else None
    return Placement(item_id, name, available_at, worker_id, token, expires_at, leased, started)
