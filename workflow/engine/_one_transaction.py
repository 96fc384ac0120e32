"""A step's outcome and its workflow's next commands in one commit (one transaction per step).

The worker tries this first for a step that finished: when the run is cached
on this worker, the outcome goes straight into the suspended workflow and the
commit carries both, conditional on nothing new in the run's log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec

from workflow.engine._capacity import Capacity
from workflow.engine._commits import describe_work
from workflow.engine._committer import Committer
from workflow.engine._sticky_cache import StickyCache
from workflow.engine._task import EagerSteps, Turn, run_task
from worlds.protocol import World
from worlds.types import (
    CommitRequest,
    CommitResult,
    NewWorkItem,
    StepCompleted,
    StepFailed,
    WorkItem,
)

__all__ = ["StepWithWorkflow"]

log = logging.getLogger("workflow.worker")


class StepWithWorkflow:
    """Commits a finished step together with the next task of its cached workflow."""

    def __init__(
        self,
        world: World,
        cache: StickyCache,
        capacity: Capacity,
        eager: EagerSteps,
        committer: Committer,
    ) -> None:
        self._world = world
        self._cache = cache
        self._capacity = capacity
        self._eager = eager
        self._committer = committer

    async def commit(
        self,
        item: WorkItem,
        request: CommitRequest,
        commit_with: Callable[[CommitRequest], Awaitable[CommitResult]] | None = None,
    ) -> list[WorkItem] | None:
        """Feed the outcome in ``request`` straight into the run's cached workflow and
        commit it with the workflow's next commands; the items leased, or None.

        ``commit_with`` commits the combined request (default: the worker's group
        commit); a transaction step's is its open transaction's ``commit``.

        The commit is conditional (``expect_seq``): if anything the workflow would
        see reached the log meanwhile, the world writes nothing, the instance
        (which has seen the outcome too early) is dropped and ``None`` tells the
        caller to commit ``request`` the ordinary way, as it does when the run is
        not cached here or the commit fails. A crash before the commit leaves
        the step's lease to expire: only that step runs again.
        """
        outcome = request.events[0] if len(request.events) == 1 else None
        if self._capacity.stopping or not isinstance(outcome, (StepCompleted, StepFailed)):
            return None
        instance = self._cache.peek(item.run_id)
        if instance is None:
            return None
        try:
            at = max(self._world.now(), instance.latest_at)
            horizon = instance.feed_outcome(msgspec.structs.replace(outcome, at=at))
            if horizon is None:  # nothing fed: the instance stays as it was
                return None
            self._cache.take(item.run_id)

            async def send(turn: Turn) -> CommitResult | None:
                if turn.commit.children:  # children are created before their start is committed
                    return None
                schedule = turn.schedule
                if turn.blocked:  # a unique claim to settle first: the workflow task goes on
                    schedule += (NewWorkItem(kind="workflow"),)
                self._capacity.reserve_for(item, turn.extra_slots)
                return await (commit_with or self._committer.send)(
                    msgspec.structs.replace(
                        request,
                        events=(outcome, *turn.commit.events),
                        schedule=schedule,
                        expect_seq=horizon,
                        at=at,
                    )
                )

            task = await run_task(instance, send, self._eager, settle_claims=False)
        except Exception as exc:
            log.debug(
                "worker %s: committing %s with its workflow failed: %r",
                self._committer.worker_id,
                describe_work(item),
                exc,
            )
            if self._cache.peek(item.run_id) is instance:  # it failed before its take
                self._cache.take(item.run_id)
            instance.dispose()
            return None
        result = task.result
        if result is None:
            instance.dispose()
            return None
        if result.stale:
            log.debug(
                "worker %s: %s moved on meanwhile: committed alone",
                self._committer.worker_id,
                describe_work(item),
            )
            instance.dispose()
            return None
        if not result.ok:
            instance.dispose()
            if result.lease_lost:
                self._committer.lease_lost(item, bool(result.events), result.lease_holder)
            return list(result.leased)
        if instance.finished or task.turn.blocked:
            instance.dispose()
        else:
            self._cache.keep(instance)
        return list(result.leased)
