"""A step's outcome and its workflow's next commands in one commit (one transaction per step).

``Worker._execute`` tries this first for a step that finished: when the run is
cached on this worker, the outcome goes straight into the suspended workflow and
the commit carries both, conditional on nothing new in the run's log.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import msgspec

from workflow import _observe
from workflow.engine._commits import closed_report, closes_run, describe_work
from worlds.types import CommitRequest, NewWorkItem, StepCompleted, StepFailed, WorkItem

if TYPE_CHECKING:
    from workflow.engine.worker import Worker

__all__ = ["commit_with_workflow"]

log = logging.getLogger("workflow.worker")


async def commit_with_workflow(
    worker: Worker, item: WorkItem, request: CommitRequest
) -> list[WorkItem] | None:
    """One transaction per step: feed the outcome in ``request`` straight into the
    run's cached workflow and commit it with the workflow's next commands.

    The commit is conditional (``expect_seq``): if anything the workflow would
    see reached the log meanwhile, the world writes nothing, the instance
    (which has seen the outcome too early) is dropped and ``None`` tells the
    caller to commit ``request`` the ordinary way, as it does when the run is
    not cached here or the commit fails. A crash before the commit leaves
    the step's lease to expire: only that step runs again.
    """
    outcome = request.events[0] if len(request.events) == 1 else None
    if worker._stopping or not isinstance(outcome, (StepCompleted, StepFailed)):
        return None
    instance = worker._cache.get(item.run_id)
    horizon = None if instance is None else instance.horizon()
    if instance is None or horizon is None:
        return None
    del worker._cache[item.run_id]
    try:
        at = max(worker.world.now(), instance.latest_at)
        instance.feed_outcome(msgspec.structs.replace(outcome, at=at))
        blocked = instance.advance()
        commit = instance.take_commit()
        if commit.children:  # children are created before their start is committed
            instance.dispose()
            return None
        worker._steps.update(instance.step_definitions)
        schedule, extra_slots = worker._mark_eager(commit.schedule)
        if blocked:  # a unique claim to settle first: the workflow task goes on
            schedule += (NewWorkItem(kind="workflow"),)
        worker._reserve(item, extra_slots)
        result = await worker._committer.commit(
            msgspec.structs.replace(
                request,
                events=(outcome, *commit.events),
                schedule=schedule,
                expect_seq=horizon,
                at=at,
            )
        )
    except Exception as exc:
        log.debug(
            "worker %s: committing %s with its workflow failed: %r",
            worker.worker_id,
            describe_work(item),
            exc,
        )
        instance.dispose()
        return None
    if result.stale:
        log.debug(
            "worker %s: %s moved on meanwhile: committed alone",
            worker.worker_id,
            describe_work(item),
        )
        instance.dispose()
        return None
    if not result.ok:
        instance.dispose()
        if result.lease_lost:
            worker._lease_lost(item, bool(result.events), result.lease_holder)
        return list(result.leased)
    instance.committed(result.events)
    closing = next((event for event in result.events if closes_run(event)), None)
    if closing is not None and _observe.current() is not None:
        _observe.run_closed(closed_report(instance, closing))
    if instance.finished or blocked:
        instance.dispose()
    else:
        worker._keep(instance)
    return list(result.leased)
