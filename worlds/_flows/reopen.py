"""Retry and fork: ``World.reopen_run`` and ``fork_run``, for every backend.

``reopen_run`` appends the ``RunReopened`` of ``reopen.plan_reopen`` to a failed
or cancelled run and queues what it needs (its unfinished steps, waiting
timers, its workflow). ``fork_run`` creates a new run from the log of another
before one of its steps (``reopen.plan_fork``): its ``RunCreated``, the events
of that prefix, ``RunForked``, and the work they leave undone.
"""

from __future__ import annotations

from worlds._flows import closing, work
from worlds._flows.rows import IdTaken, Rows
from worlds._flows.tx import Tx
from worlds._rules import reopen, requests, runs
from worlds.types import RunRecord

__all__ = ["fork_run", "reopen_run"]


async def reopen_run(rows: Rows, run_id: str, by: str) -> RunRecord | None:
    """See ``World.reopen_run``."""
    tx = Tx(rows)
    run = await rows.get_run(run_id)
    if run is None:
        return None
    plan = reopen.plan_reopen(run, await rows.events(run_id), by)
    if plan.event is None:
        return run
    run, _ = tx.stamp(run, plan.event)
    for new in plan.work:
        run, _ = await work.enqueue(tx, run, new)
    await closing.save(tx, run)
    return run


async def fork_run(
    rows: Rows, source_run_id: str, run_id: str, from_step: int, by: str
) -> RunRecord | None:
    """See ``World.fork_run``."""
    tx = Tx(rows)
    source = await rows.get_run(source_run_id, lock=False)
    if source is None:
        return None
    plan = reopen.plan_fork(source, await rows.events(source_run_id), from_step, by)
    run = runs.new_run(run_id, source.workflow, plan.attributes, tx.rows.now)
    created = runs.created_event(source.workflow, plan.args, plan.attributes, tx.rows.now)
    try:
        await rows.insert_run(run, created, wake_at=None)
    except IdTaken:
        raise requests.run_exists(run_id) from None
    for event in plan.events:
        run, _ = tx.stamp(run, event)
    for new in plan.work:
        run, _ = await work.enqueue(tx, run, new)
    await rows.index_attributes(run_id, run.attributes)
    await closing.save(tx, run)
    return run
