"""Storing a run, and what closing it does, in the transaction that closes it.

``save`` stores a run's appended events and state. When the run is closed it
first frees its slots and places in line (promoting whom that admits) and
applies each of its claims' reuse window (``claims.on_close``; a run that
continued as new handed its claims on), and once stored it signals the run's
topic. When this transaction closed it (``Tx.closing``), the rules of
``worlds._rules.children`` follow: a child's parent gets ``ChildClosed`` and is
woken, and a run that failed, was cancelled or continued cancels its open
children, each closing in turn (``cancel``), recursively.
"""

from __future__ import annotations

from worlds._flows import slots, work
from worlds._flows.tx import Tx
from worlds._rules import cancel as cancelling
from worlds._rules import children, claims
from worlds.protocol import run_topic
from worlds.types import EventKind, RunRecord, RunStatus

__all__ = ["cancel", "save"]


async def save(tx: Tx, run: RunRecord) -> None:
    """Store ``run`` (its queued events and state), doing what its closing does."""
    rows = tx.rows
    closing = tx.closing.pop(run.id, None)
    closed = run.status.is_closed
    if closed and run.status is not RunStatus.CONTINUED:  # its claims moved to the next run
        await _close_claims(tx, run)
    await rows.save_run(run)
    if closed:
        # last: promoting at a limited key locks the key (PostgreSQL) until the commit,
        # so the run's own rows are written before, outside that lock
        await slots.promote(tx, await rows.drop_run_slots(run.id))
        rows.signal(run_topic(run.id))
    if closing is not None:
        await _after_close(tx, run, closing)


async def cancel(tx: Tx, run: RunRecord, reason: str | None) -> RunRecord:
    """Close open ``run`` as cancelled (``cancel_now``) and store it; closed: unchanged."""
    event = cancelling.cancel_now(run.status, reason)
    if event is None:
        return run
    run, _ = tx.stamp(run, event)
    await save(tx, run)
    return run


async def _close_claims(tx: Tx, run: RunRecord) -> None:
    """Apply the reuse window of each claim ``run`` held, now that it closed."""
    assert run.closed_at is not None
    for held in await tx.rows.windowed_claims(run.id):
        fate = claims.on_close(run.status, run.closed_at, held.ttl, held.release_on)
        if fate == "release":
            await tx.rows.release_claim(held.pair)
        elif fate is not None:
            await tx.rows.lapse_claim(held.pair, fate)


async def _after_close(tx: Tx, run: RunRecord, closing: EventKind) -> None:
    """Tell the parent its child closed; cancel the children that close with it."""
    notice = children.closed_notice(run, closing)
    if notice is not None:
        parent = await tx.rows.get_run(notice.parent_run_id)
        if parent is not None and children.accepts_notice(parent):
            parent, _ = tx.stamp(parent, notice.event)
            await save(tx, await work.wake(tx, parent))
    if children.cascades(run):
        reason = children.cascade_reason(run)
        for child in await tx.rows.open_runs_with(children.PARENT_KEY, run.id):
            if children.cancels_with_parent(child, run.id):
                await cancel(tx, child, reason)
