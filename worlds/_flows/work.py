"""Enqueueing work: where a new item goes, merged into the run's one workflow item.

A run has at most one workflow item. Enqueueing another while a worker holds it
marks it for a rewake (due again when that lease is acked); otherwise the item
becomes due at the earlier of the two times, and is leased at once when the
enqueuer asks and it is due. A step or timer item replaces one with its id.
A step leased at once appends its ``StepStarted`` (``worlds._rules.work.place``).
"""

from __future__ import annotations

from worlds._flows.rows import LeaseRow, Placement
from worlds._flows.tx import Tx
from worlds._rules import slots, starts, work
from worlds.protocol import work_topic
from worlds.semantics import lease_deadline, work_item_id, workflow_item_id
from worlds.types import NewWorkItem, RunRecord, RunStatus, WorkItem

__all__ = ["enqueue", "wake"]


async def enqueue(
    tx: Tx, run: RunRecord, new: NewWorkItem, worker_id: str = "", seconds: float = 0.0
) -> tuple[RunRecord, WorkItem | None]:
    """Add ``new`` to ``run``'s queue; the run after it and the item if leased to
    ``worker_id`` (for ``seconds``)."""
    rows, now = tx.rows, tx.rows.now
    placed = work.place(
        run,
        work_item_id(run.id, new),
        new,
        now=now,
        worker_id=worker_id,
        lease_seconds=seconds,
        new_token=rows.new_token,
    )
    if new.kind != "workflow":
        await rows.put_work(run.id, new, placed)
    elif not await rows.add_work(run.id, new, placed):
        return run, await _merge(tx, run, new, placed, worker_id, seconds)
    if placed.leased is None:
        rows.signal(work_topic(placed.name))
    elif placed.started is not None:
        run, _ = tx.stamp(run, placed.started)
    return run, placed.leased


async def wake(tx: Tx, run: RunRecord) -> RunRecord:
    """Enqueue ``run``'s workflow item, due now; the run after it. A run waiting
    in line to go on after a retry or fork (``slots.waits_to_go_on``), or waiting
    for its start (``starts.waits_to_start``: a delay, a slot, a rate token) is left
    asleep: what woke it is in its log, and its start or promotion wakes it."""
    if slots.waits_to_go_on(run):
        return run
    if run.status is RunStatus.PENDING and run.started_at is None:
        now = tx.rows.now
        item = await tx.rows.get_work(run.id, workflow_item_id(run.id))
        due_at = None if item is None else item.available_at
        leased = item is not None and item.expires_at is not None and item.expires_at > now
        in_line = item is None and bool(await tx.rows.waiting_views(run.id, 0))
        if starts.waits_to_start(run, due_at, leased, in_line, now):
            return run  # not before its start time, slot or token
    run, _ = await enqueue(tx, run, NewWorkItem(kind="workflow"))
    return run


async def _merge(
    tx: Tx, run: RunRecord, new: NewWorkItem, placed: Placement, worker_id: str, seconds: float
) -> WorkItem | None:
    """Merge ``placed`` into the run's workflow item, which exists already."""
    rows, now, item_id = tx.rows, tx.rows.now, placed.item_id
    existing = await rows.get_work(run.id, item_id)
    assert existing is not None, "the run's workflow item was there (adding it conflicted)"
    if existing.owner is not None and existing.expires_at is not None and existing.expires_at > now:
        await rows.set_rewake(run.id, item_id)
        return None
    available_at = min(existing.available_at, placed.available_at)
    if new.lease and available_at <= now:
        token, expires_at = rows.new_token(), lease_deadline(now, seconds)
        lease = LeaseRow(worker_id, token, expires_at, available_at, existing.attempt)
        await rows.lease_work(run.id, item_id, lease)
        return WorkItem(
            id=item_id,
            run_id=run.id,
            kind="workflow",
            name=existing.name,
            number=existing.number,
            attempt=existing.attempt,
            payload=existing.payload,
            token=token,
            lease_expires_at=expires_at,
        )
    await rows.set_available(run.id, item_id, available_at)
    rows.signal(work_topic(existing.name))
    return None
