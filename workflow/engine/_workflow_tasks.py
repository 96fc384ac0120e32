"""The workflow side of a worker: running a leased workflow task.

A task reads the run's log (only the tail when its instance is in the sticky
cache; the whole log when the cached instance turned out stale), feeds it,
and drives the body with ``run_task``, creating the children a turn starts
before committing it. If the world fails under a task, the task is replayed
afresh while its lease is ours (the replay finds whatever part of it had been
committed); a task that fails otherwise ``POISON_LIMIT`` times fails its run.
"""

from __future__ import annotations

import anyio

from workflow.engine._capacity import Capacity
from workflow.engine._children import create_children
from workflow.engine._commits import describe_work, poisoned_run_commit
from workflow.engine._committer import Committer
from workflow.engine._failures import with_handler
from workflow.engine._faults import POISON_LIMIT, Backoff, Complaints, is_fatal, is_transient
from workflow.engine._instance import WorkflowInstance
from workflow.engine._recorder import Commit
from workflow.engine._registry import Registry
from workflow.engine._sticky_cache import StickyCache
from workflow.engine._task import EagerSteps, Turn, run_task
from worlds.protocol import World
from worlds.types import CommitRequest, CommitResult, WorkItem

__all__ = ["WorkflowTasks"]


class WorkflowTasks:
    """Runs the workflow tasks one worker leased."""

    def __init__(
        self,
        world: World,
        worker_id: str,
        lease_seconds: float,
        call_timeout: float,
        registry: Registry,
        cache: StickyCache,
        capacity: Capacity,
        eager: EagerSteps,
        committer: Committer,
        complaints: Complaints,
    ) -> None:
        self._world = world
        self._worker_id = worker_id
        self._lease_seconds = lease_seconds
        self._call_timeout = call_timeout
        self._registry = registry
        self._cache = cache
        self._capacity = capacity
        self._eager = eager
        self._committer = committer
        self._complaints = complaints

    async def run(self, item: WorkItem) -> list[WorkItem]:
        """Run workflow task ``item``, riding out a world in trouble; what it leased."""
        backoff = Backoff(cap=self._lease_seconds / 6)
        doing = f"run {describe_work(item)}"
        poisoned = 0
        while True:
            try:
                leased = await self._run_once(item)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    raise fatal from exc
                if not is_transient(exc):
                    poisoned += 1
                    if poisoned >= POISON_LIMIT:
                        self._complaints.failed(doing, exc, None)
                        request = await with_handler(
                            poisoned_run_commit(item, exc, self._worker_id, self._lease_seconds),
                            self._registry.workflow(item.name),
                            self._world,
                        )
                        return await self._committer.commit(item, request)
                delay = backoff.next()
                self._complaints.failed(doing, exc, delay)
                await anyio.sleep(delay)
            else:
                self._complaints.succeeded(doing)
                return leased
            if not await self._still_ours(item):
                return []

    async def _still_ours(self, item: WorkItem) -> bool:
        """Renew ``item``'s lease; False if it was lost (or the item finished)."""
        try:
            with anyio.fail_after(self._call_timeout):
                alive = await self._world.renew_leases(self._worker_id, [item], self._lease_seconds)
        except Exception:
            return True  # still unreachable: the next try will tell
        return alive[0]

    async def _run_once(self, item: WorkItem) -> list[WorkItem]:
        instance = self._cache.take(item.run_id)
        try:
            after = instance.last_seq if instance is not None else 0
            events = await self._world.read_events(item.run_id, after_seq=after)
            if instance is not None and instance.is_stale(events):
                instance.dispose()
                instance = None
                events = await self._world.read_events(item.run_id)
            if instance is None:
                definition = self._registry.workflow(item.name)
                if definition is None:
                    await self._world.release(self._worker_id, [item])
                    return []
                instance = WorkflowInstance(item.run_id, definition, self._world)
            instance.feed(events)

            async def create(commit: Commit) -> None:
                await create_children(self._world, commit.events, commit.children)

            async def send(turn: Turn) -> CommitResult:
                self._capacity.reserve_for(item, turn.extra_slots)
                return await self._committer.send(
                    CommitRequest(
                        run_id=item.run_id,
                        worker_id=self._worker_id,
                        lease=item,
                        events=tuple(turn.commit.events),
                        schedule=turn.schedule,
                        ack=not turn.blocked,
                        lease_seconds=self._lease_seconds,
                    )
                )

            task = await run_task(instance, send, self._eager, prepare=create)
            if not task.committed:
                instance.dispose()
                return task.leased
        except BaseException:
            if instance is not None:
                instance.dispose()  # a half-committed task is replayed from the log
            raise
        if instance.finished:
            instance.dispose()
        else:
            self._cache.keep(instance)
        return task.leased
