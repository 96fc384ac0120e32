"""The worker: leases work from a world and runs workflow bodies and steps.

::

    async with Worker(world, [charge_order, capture]) as worker:
        ...   # runs are executed while the block is open

A worker keeps suspended workflows in memory (a sticky cache), so a run with n
steps costs O(n) work, not O(n^2) replays. When a commit schedules work this
worker can do, the world leases it to the worker in the same transaction
(eager execution), so a sequential workflow needs no polling between steps.
Everything it holds is leased; a lease that is not renewed expires and
another worker takes the work over.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import types
import uuid
from collections.abc import Iterable
from typing import Any, Self

import anyio
import msgspec

from workflow.client import serve_world, stop_serving_world
from workflow.decorators import StepDefinition, WorkflowDefinition
from workflow.engine._instance import WorkflowInstance
from workflow.engine._step import run_step
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, World
from worlds.semantics import CANCEL_DEADLINE_TIMER, RUN_DEADLINE_TIMER
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    EventKind,
    NewWorkItem,
    RunCancelled,
    RunFailed,
    WaitCompleted,
    WorkItem,
)

__all__ = ["Worker"]

log = logging.getLogger("workflow.worker")


class Worker:
    """Runs the given workflows and steps from ``world`` until closed.

    Args:
        world: the world to take work from.
        functions: ``@workflow`` and ``@step`` functions, or modules holding them.
            A workflow brings along the steps its module defines or imports.
        concurrency: most work items (workflow tasks and step attempts) in flight.
        lease_seconds: how long a lease lasts unless renewed; work held by a
            worker that died is taken over after this long.
        poll_interval: longest idle wait before asking the world for work again.
        shutdown_grace: on close, how long in-flight work may take to finish
            before it is cancelled and its leases released.
        cache_size: how many suspended workflows to keep in memory.
    """

    def __init__(
        self,
        world: World,
        functions: Iterable[Any] = (),
        *,
        concurrency: int = 64,
        lease_seconds: float = 30.0,
        poll_interval: float = 0.25,
        shutdown_grace: float = 10.0,
        cache_size: int = 10_000,
        worker_id: str | None = None,
    ) -> None:
        if getattr(world, "protocol_version", None) != PROTOCOL_VERSION:
            raise TypeError(f"{world!r} does not implement world protocol {PROTOCOL_VERSION}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.world = world
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self._workflows: dict[str, WorkflowDefinition[..., Any]] = {}
        self._steps: dict[str, StepDefinition[..., Any]] = {}
        for fn in functions:
            self.register(fn)
        self._cache: collections.OrderedDict[str, WorkflowInstance] = collections.OrderedDict()
        self._cache_size = cache_size
        self._in_flight: dict[str, tuple[WorkItem, anyio.CancelScope]] = {}
        # Slots promised to leases still awaiting the world, so that a lease and
        # an eager commit in flight at the same time cannot overfill the worker.
        self._reserved = 0
        self._reserved_by: dict[str, int] = {}
        self._capacity = anyio.Event()
        self._stopping = False
        self._task_group: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ registry

    def register(self, fn: Any) -> None:
        """Add a workflow, a step, or every workflow and step of a module."""
        if isinstance(fn, types.ModuleType):
            for value in vars(fn).values():
                if isinstance(value, (WorkflowDefinition, StepDefinition)):
                    self.register(value)
            return
        if isinstance(fn, WorkflowDefinition):
            table: dict[str, Any] = self._workflows
        elif isinstance(fn, StepDefinition):
            table = self._steps
        else:
            raise TypeError(f"Worker runs @workflow and @step functions (or modules), not {fn!r}")
        existing = table.get(fn.name)
        if existing is not None and existing is not fn:
            raise ValueError(
                f"two functions are registered as {fn.name!r}: {existing!r} and {fn!r}"
            )
        table[fn.name] = fn
        if isinstance(fn, WorkflowDefinition):
            # the steps a workflow can call are those its module can see
            for value in list(getattr(fn.fn, "__globals__", {}).values()):
                if isinstance(value, StepDefinition):
                    self.register(value)

    @property
    def names(self) -> frozenset[str]:
        """Names of everything this worker can run."""
        return frozenset(self._workflows) | frozenset(self._steps)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        serve_world(self.world)  # client calls without world= now check against it
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._dispatch)
        self._task_group.start_soon(self._renew_leases)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        try:
            await self._shutdown()
            assert self._task_group is not None
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(exc_type, exc, tb)
            self._task_group = None
        finally:
            stop_serving_world(self.world)

    async def run(self) -> None:
        """Run until cancelled (e.g. by a signal handler), then shut down gracefully."""
        async with self:
            await anyio.sleep_forever()

    async def _shutdown(self) -> None:
        self._stopping = True
        self._capacity.set()
        with anyio.move_on_after(self.shutdown_grace, shield=True):
            while self._in_flight:
                await anyio.sleep(0.01)
        held = [item for item, scope in self._in_flight.values()]
        for _, scope in self._in_flight.values():
            scope.cancel()
        if held:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await self.world.release(self.worker_id, held)
        for instance in self._cache.values():
            instance.dispose()
        self._cache.clear()

    # ------------------------------------------------------------------ dispatch

    async def _dispatch(self) -> None:
        assert self._task_group is not None
        while not self._stopping:
            free = self._free_slots()
            if free <= 0:
                self._capacity = anyio.Event()
                await self._capacity.wait()
                continue
            self._reserved += free
            try:
                items = await self.world.lease(
                    self.worker_id, names=self.names, limit=free, lease_seconds=self.lease_seconds
                )
            except Exception:
                # The world is unreachable for now (a restarted database, say):
                # keep the worker alive and ask again after a pause.
                log.exception("worker %s could not lease work; retrying", self.worker_id)
                await anyio.sleep(self.poll_interval)
                continue
            finally:
                self._reserved -= free
            if self._stopping:
                await self.world.release(self.worker_id, items)
                return
            for item in items:
                self._spawn(item)
            if not items:
                await self.world.wait(WORK_TOPIC, self.poll_interval)

    def _free_slots(self) -> int:
        return self.concurrency - len(self._in_flight) - self._reserved

    def _forget(self, item: WorkItem) -> None:
        """Drop ``item`` from the in-flight table, unless its id was leased again
        (a retry of the same step) and the entry is the newer lease's."""
        entry = self._in_flight.get(item.id)
        if entry is not None and entry[0] is item:
            del self._in_flight[item.id]

    def _spawn(self, item: WorkItem) -> None:
        assert self._task_group is not None
        self._in_flight[item.id] = (item, anyio.CancelScope())
        self._task_group.start_soon(self._process, item)

    async def _process(self, item: WorkItem | None) -> None:
        while item is not None:
            try:
                leased = await self._execute(item)
            except Exception:
                log.exception(
                    "worker %s failed on %s; its lease will expire", self.worker_id, item.id
                )
                leased = []
            finally:
                self._forget(item)
                self._reserved -= self._reserved_by.pop(item.id, 0)
            item = leased[0] if leased else None
            if item is not None:
                self._in_flight[item.id] = (item, anyio.CancelScope())
            for extra in leased[1:]:
                self._spawn(extra)
        self._capacity.set()

    def _reserve(self, item: WorkItem, slots: int) -> None:
        """Hold ``slots`` for items a commit under ``item`` may lease, until they run."""
        self._reserved += slots
        self._reserved_by[item.id] = self._reserved_by.get(item.id, 0) + slots

    async def _renew_leases(self) -> None:
        interval = self.lease_seconds / 3
        while True:
            await anyio.sleep(interval)
            entries = list(self._in_flight.values())
            if not entries:
                continue
            try:
                alive = await self.world.renew_leases(
                    self.worker_id, [item for item, _ in entries], self.lease_seconds
                )
            except Exception:
                log.exception("worker %s could not renew its leases", self.worker_id)
                continue
            for (item, scope), ok in zip(entries, alive, strict=True):
                if not ok and item.kind == "step":
                    scope.cancel()

    # ------------------------------------------------------------------ execution

    async def _execute(self, item: WorkItem) -> list[WorkItem]:
        if item.kind == "workflow":
            return await self._run_workflow_task(item)
        if item.kind == "timer":
            return await self._commit(self._timer_commit(item))
        step = self._steps.get(item.name)
        if step is None:
            await self.world.release(self.worker_id, [item])
            return []
        scope = self._in_flight[item.id][1]
        # the run this step wakes continues in the step's own slot, unless stopping
        request = await run_step(
            self.world, self.worker_id, item, step, scope, self.lease_seconds, not self._stopping
        )
        return await self._commit(request)

    def _timer_commit(self, item: WorkItem) -> CommitRequest:
        """What a due timer does: close a run past a deadline, or wake its workflow."""
        events: tuple[EventKind, ...]
        schedule: tuple[NewWorkItem, ...] = ()
        if item.number == CANCEL_DEADLINE_TIMER:
            events = (RunCancelled(reason="cleanup did not finish within the grace period"),)
        elif item.number == RUN_DEADLINE_TIMER:
            error = ErrorInfo(type="TimeoutError", message="the run did not finish in time")
            events = (RunFailed(error=error),)
        else:
            events = (WaitCompleted(wait=item.number),)
            schedule = (NewWorkItem(kind="workflow", lease=not self._stopping),)
        return CommitRequest(
            run_id=item.run_id,
            worker_id=self.worker_id,
            lease=item,
            events=events,
            schedule=schedule,
            lease_seconds=self.lease_seconds,
        )

    async def _commit(self, request: CommitRequest) -> list[WorkItem]:
        result = await self.world.commit(request)
        return list(result.leased)

    async def _run_workflow_task(self, item: WorkItem) -> list[WorkItem]:
        instance = self._cache.pop(item.run_id, None)
        after = instance.last_seq if instance is not None else 0
        events = await self.world.read_events(item.run_id, after_seq=after)
        if instance is not None and instance.is_stale(events):
            instance.dispose()
            instance = None
            events = await self.world.read_events(item.run_id)
        if instance is None:
            definition = self._workflows.get(item.name)
            if definition is None:
                await self.world.release(self.worker_id, [item])
                return []
            instance = WorkflowInstance(item.run_id, definition, self.world)
        instance.feed(events)
        leased: list[WorkItem] = []
        while True:
            blocked = instance.advance()
            commit = instance.take_commit()
            self._steps.update(instance.step_definitions)
            schedule, extra_slots = self._mark_eager(commit.schedule)
            self._reserve(item, extra_slots)
            result = await self.world.commit(
                CommitRequest(
                    run_id=item.run_id,
                    worker_id=self.worker_id,
                    lease=item,
                    events=tuple(commit.events),
                    schedule=schedule,
                    ack=not blocked,
                    lease_seconds=self.lease_seconds,
                )
            )
            leased.extend(result.leased)
            if not result.ok:
                instance.dispose()
                return leased
            instance.committed(result.events)
            if not blocked:
                break
        if instance.finished:
            instance.dispose()
        else:
            self._cache[item.run_id] = instance
            while len(self._cache) > self._cache_size:
                _, evicted = self._cache.popitem(last=False)
                evicted.dispose()
        return leased

    def _mark_eager(self, schedule: list[NewWorkItem]) -> tuple[tuple[NewWorkItem, ...], int]:
        """Ask for the steps this worker can start now; return them and the extra
        slots they need (the first one continues in the current item's slot)."""
        budget = 0 if self._stopping else self._free_slots() + 1
        marked = []
        eager = 0
        for new in schedule:
            if eager < budget and new.kind == "step" and new.name in self._steps:
                new = msgspec.structs.replace(new, lease=True)
                eager += 1
            marked.append(new)
        return tuple(marked), max(eager - 1, 0)
