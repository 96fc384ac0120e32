"""Cancelling: ``World.cancel_run`` and ``request_cancel``, for every backend.

``cancel_run`` closes an open run at once (``cancel.cancel_now``).
``cancel_listed`` does either to many runs in one transaction.
``request_cancel`` follows ``cancel.plan_cancel``: a pending run closes, a
running one gets ``RunCancelRequested`` with a deadline: its queued and
leased steps and timers go (a step attempt in flight gets ``StepDiscarded``,
so its worker stops it), its workflow is woken to clean up, and the deadline
timer is queued. Closing does what ``closing.save`` says.
"""

from __future__ import annotations

from collections.abc import Sequence

from worlds._flows import closing, work
from worlds._flows.rows import Rows
from worlds._flows.tx import Tx
from worlds._rules import cancel
from worlds.types import RunRecord, RunStatus

__all__ = ["cancel_listed", "cancel_run", "request_cancel"]


async def cancel_run(rows: Rows, run_id: str, reason: str | None) -> RunRecord | None:
    """See ``World.cancel_run``."""
    run = await rows.get_run(run_id)
    if run is None:
        return None
    return await closing.cancel(Tx(rows), run, reason)


async def request_cancel(
    rows: Rows, run_id: str, reason: str | None, grace_seconds: float
) -> RunRecord | None:
    """See ``World.request_cancel``."""
    tx = Tx(rows)
    run = await rows.get_run(run_id)
    if run is None:
        return None
    plan = cancel.plan_cancel(run.status, run.workflow, reason, tx.rows.now, grace_seconds)
    if plan.event is None:
        return run
    run, _ = tx.stamp(run, plan.event)
    if plan.timer is not None:
        dropped = await rows.drop_cancelled_work(run_id)
        for item in sorted(dropped, key=lambda item: (item.kind, item.number)):
            discard = cancel.discarded(item.kind, item.number, item.attempt, item.in_flight)
            if discard is not None:
                run, _ = tx.stamp(run, discard)
        run = await work.wake(tx, run)
        run, _ = await work.enqueue(tx, run, plan.timer)
    await closing.save(tx, run)
    return run


async def cancel_listed(
    rows: Rows, run_ids: Sequence[str], reason: str | None, grace_seconds: float | None
) -> dict[str, RunStatus | None]:
    """See ``World.cancel_listed``: each run's status after, in id order."""
    found: dict[str, RunStatus | None] = {}
    for run_id in sorted(set(run_ids)):  # one lock order for every caller
        if grace_seconds is None:
            run = await cancel_run(rows, run_id, reason)
        else:
            run = await request_cancel(rows, run_id, reason, grace_seconds)
        found[run_id] = None if run is None else run.status
    return found
