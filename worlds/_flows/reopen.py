"""Retry and fork: ``World.reopen_run``, ``reopen_listed`` and ``fork_run``, for
every backend.

``reopen_run`` appends the ``RunReopened`` of ``reopen.plan_reopen`` to a failed
or cancelled run and queues what it needs (its unfinished steps, waiting
timers, its workflow). ``fork_run`` creates a new run from the log of another
before one of its steps (``reopen.plan_fork``): its ``RunCreated``, the events
of that prefix, ``RunForked``, and the work they leave undone.

Either way the run's body goes on as if it still held what closing took from
it, so first it holds them again: the tokens of the hooks it created (another
run holding one refuses the whole operation) and its slots (``slots.retake``:
its ``Limited`` start pairs and the ``hold()`` blocks it was inside, all at
once; when one is not free the run waits ``pending``, in line like any other
run, and gets its work when promoted).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from worlds._flows import closing, slots, work
from worlds._flows.rows import HookRow, IdTaken, Rows
from worlds._flows.tx import Tx
from worlds._rules import reopen, requests, runs
from worlds.types import EventKind, ListedReopen, NewWorkItem, RunRecord, RunStatus

__all__ = ["fork_run", "reopen_listed", "reopen_run"]


async def reopen_run(rows: Rows, run_id: str, by: str) -> RunRecord | None:
    """See ``World.reopen_run``."""
    done = await _reopen(rows, run_id, by, once=False)
    return None if done is None else done[0]


async def reopen_listed(
    rows: Rows, run_ids: Sequence[str], by: str
) -> dict[str, ListedReopen | None]:
    """See ``World.reopen_listed``: what it did to each run, in id order."""
    found: dict[str, ListedReopen | None] = {}
    for run_id in sorted(set(run_ids)):  # one lock order for every caller
        savepoint = await rows.savepoint()
        try:
            done = await _reopen(rows, run_id, by, once=True)
        except ValueError as refused:
            await rows.rollback_to(savepoint)
            run = await rows.get_run(run_id, lock=False)
            found[run_id] = (
                None if run is None else ListedReopen(status=run.status, refused=str(refused))
            )
            continue
        await rows.release(savepoint)
        if done is None:
            found[run_id] = None
        else:
            run, reopened = done
            found[run_id] = ListedReopen(status=run.status, reopened=reopened)
    return found


async def _reopen(rows: Rows, run_id: str, by: str, *, once: bool) -> tuple[RunRecord, bool] | None:
    """Run ``run_id`` after reopening it by ``by``, and whether it is reopened by ``by``
    (``None``: unknown). ``once``: a run whose log records a ``RunReopened`` by ``by``
    already is left as it is (and counts as reopened)."""
    tx = Tx(rows)
    run = await rows.get_run(run_id)
    if run is None:
        return None
    events = await rows.events(run_id)
    if once and reopen.reopened_by(events, by):
        return run, True
    plan = reopen.plan_reopen(run, events, by)
    if plan.event is None:
        return run, False
    run, reopened = tx.stamp(run, plan.event)
    return await _go_on(tx, run, reopen.effective_log([*events, reopened]), plan.work), True


async def _go_on(
    tx: Tx, run: RunRecord, log: list[EventKind], queue: Sequence[NewWorkItem]
) -> RunRecord:
    """Reopened or forked ``run`` (replayed log ``log``) holds its hooks and slots
    again and gets ``queue``; or, when a slot is not free, waits pending for it
    and gets its work once promoted (``slots.retake``)."""
    for created in reopen.hooks_to_hold(log):
        hook = HookRow(created.token, run.id, created.hook, created.attributes)
        if not await tx.rows.insert_hook(hook):
            holder = await tx.rows.hook_holder(created.token)
            if holder is not None and holder.run_id != run.id:
                raise reopen.hook_taken(run.id, created.token, holder.run_id)
    entered = await slots.retake(tx, run, log)
    if entered is None:
        run = msgspec.structs.replace(run, status=RunStatus.PENDING)
    else:
        run = entered
        for new in queue:
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
    created = runs.created_event(
        source.workflow, plan.args, plan.attributes, tx.rows.now, plan.limits
    )
    try:
        await rows.insert_run(run, created, wake_at=None)
    except IdTaken:
        raise requests.run_exists(run_id) from None
    log: list[EventKind] = [created]
    for event in plan.events:
        run, stored = tx.stamp(run, event)
        log.append(stored)
    await rows.index_attributes(run_id, run.attributes)
    return await _go_on(tx, run, reopen.effective_log(log), plan.work)
