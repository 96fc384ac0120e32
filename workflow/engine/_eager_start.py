"""The eager start: a run started in this process gets its first task run ahead.

When ``start`` runs in a process whose ``Worker`` serves the same world object
and the workflow (``workflow._runtime.eager_starter``), the worker holds a
slot for the run (``reserve``), runs its first workflow task against the
``RunCreated`` it will have (``first_task``), and ``create_run`` stores that
task with the run and leases what it schedules to this worker, in one
transaction (RFC 0018). ``adopt`` then runs what was leased and caches the
instance. A task that must wait for the world (a unique claim, a hook token),
would close the run or starts children is not run ahead: only its lease is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import msgspec

from workflow.engine._capacity import Capacity
from workflow.engine._instance import WorkflowInstance
from workflow.engine._registry import Registry
from workflow.engine._sticky_cache import StickyCache
from workflow.engine._task import EagerSteps, Turn, run_task
from worlds.protocol import World
from worlds.types import (
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    FirstTask,
    RunCreated,
    WorkItem,
)

__all__ = ["EagerStart"]


class EagerStart:
    """One worker's side of ``start``: its runs being created and their extra slots.

    Implements ``workflow._runtime.EagerStarter``; it takes runs only between
    ``open`` and ``close``, on the thread that opened it.
    """

    def __init__(
        self,
        world: World,
        worker_id: str,
        lease_seconds: float,
        registry: Registry,
        capacity: Capacity,
        cache: StickyCache,
        eager: EagerSteps,
    ) -> None:
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self._world = world
        self._registry = registry
        self._capacity = capacity
        self._cache = cache
        self._eager = eager
        self._spawn: Callable[[WorkItem], None] | None = None
        self._thread = threading.get_ident()
        # runs being created whose first workflow task ran ahead, and their extra slots
        self._early: dict[str, tuple[WorkflowInstance, int]] = {}

    def open(self, spawn: Callable[[WorkItem], None]) -> None:
        """Take runs from now on, on this thread; ``spawn`` runs what their creation leased."""
        self._thread = threading.get_ident()
        self._spawn = spawn

    def close(self) -> None:
        """Take no more runs; what their creation leases from now on is left to expire."""
        self._spawn = None

    def reserve(self, world: World, workflow: str) -> bool:
        """Hold a slot for a run of ``workflow`` that ``start`` is creating in this
        worker's world, on this worker's thread; False if it cannot take it."""
        return (
            world is self._world
            and self._spawn is not None
            and self._registry.workflow(workflow) is not None
            and self._thread == threading.get_ident()
            and self._capacity.reserve_start()
        )

    async def first_task(self, request: CreateRunRequest) -> CreateRunRequest:
        """``request`` leased to this worker, with the run's first workflow task run
        ahead against the ``RunCreated`` it will have, so that starting the run
        and its first task are one transaction (not when the task must wait for
        a unique claim or a hook token, or would close the run: then only the
        lease)."""
        request = msgspec.structs.replace(
            request, lease_to=self.worker_id, lease_seconds=self.lease_seconds
        )
        definition = self._registry.workflow(request.workflow)
        assert definition is not None, "reserve() checked that this worker runs it"
        at = self._world.now()
        created = RunCreated(
            workflow=request.workflow,
            args=request.args,
            attributes=dict(request.attributes),
            seq=1,
            at=at,
        )
        instance = WorkflowInstance(request.run_id, definition, self._world)

        async def ahead(turn: Turn) -> CommitResult | None:
            return None  # create_run commits it, with the run

        turn = None
        try:
            instance.feed([created])
            turn = (await run_task(instance, ahead, self._eager)).turn
        except Exception:
            turn = None
        # A run that would close in its first task is left to be started (and
        # cancelled, say) as it always was, and one that starts children creates
        # them before its commit: only their lease is eager.
        if turn is None or turn.blocked or instance.finished or turn.commit.children:
            instance.dispose()
            return request
        self._capacity.reserve(turn.extra_slots)
        self._early[request.run_id] = (instance, turn.extra_slots)
        first = FirstTask(events=tuple(turn.commit.events), schedule=turn.schedule, at=at)
        return msgspec.structs.replace(request, first=first)

    def adopt(self, request: CreateRunRequest, created: CreateRunResult | None) -> None:
        """Run what creating ``request`` leased to this worker, in the slots
        ``reserve`` and ``first_task`` held, and cache the run's workflow if its
        first task was committed with it. What comes after the worker closed is
        left to its lease's expiry."""
        instance, extra_slots = self._early.pop(request.run_id, (None, 0))
        self._capacity.unreserve(1 + extra_slots)
        items: list[WorkItem] = []
        first = None if created is None else created.first
        if instance is not None and first is not None and first.ok:
            items = list(first.leased)
            instance.committed(first.events)
            if instance.finished or self._spawn is None:
                instance.dispose()
            else:
                self._cache.keep(instance)
        else:
            if instance is not None:
                instance.dispose()
            if created is not None and created.leased is not None:
                items = [created.leased]
        if self._spawn is not None:
            for item in items:
                self._spawn(item)
        self._capacity.changed()
