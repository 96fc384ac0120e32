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
import threading
import types
import uuid
from collections.abc import Iterable
from typing import Any, Self

import anyio
import msgspec

from workflow import _observe
from workflow.client import serve_world, stop_serving_world
from workflow.decorators import StepDefinition, WorkflowDefinition
from workflow.engine._children import create_children
from workflow.engine._commits import (
    closed_report,
    closes_run,
    describe_work,
    exhausted_commit,
    poisoned_run_commit,
    poisoned_step_commit,
    report_closed_by_timer,
    timer_commit,
)
from workflow.engine._faults import POISON_LIMIT, Backoff, Complaints, is_fatal, is_transient
from workflow.engine._group import GroupCommitter
from workflow.engine._instance import WorkflowInstance
from workflow.engine._one_transaction import commit_with_workflow
from workflow.engine._schedules import ScheduleLoop
from workflow.engine._step import RELEASED, attempts_exhausted, run_step
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, World
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    FirstTask,
    NewWorkItem,
    RunCreated,
    RunStatus,
    StepDiscarded,
    WorkItem,
)

__all__ = ["Worker"]

log = logging.getLogger("workflow.worker")

CANCEL_CHECK_SECONDS = 1.0
"""How often in-flight steps are checked for a cancelled run."""

_STOPS_STEPS = frozenset(
    {
        RunStatus.CANCELLING,
        RunStatus.CANCELLED,
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CONTINUED,
    }
)


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

    A world that is unavailable for a while (a restarted database, a lock held
    too long) is waited out with capped exponential backoff; a finished step's
    result is committed as soon as the world is back, for as long as its lease
    is still this worker's. A world that cannot heal by waiting (read-only,
    schema too new, authentication failed) stops the worker: ``run()`` raises
    the ``WorldMisconfiguredError`` and ``failure`` holds it.
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
        self._leasing = 0
        # runs being created whose first workflow task ran ahead, and their extra slots
        self._early: dict[str, tuple[WorkflowInstance, int]] = {}
        self._capacity = anyio.Event()
        self._stopping = False
        self._stop_requested = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._thread = threading.get_ident()
        self._complaints = Complaints(log, self.worker_id)
        self._committer = GroupCommitter(world)
        # Longest wait for a renewal before it counts as failed. Leasing and
        # commits are not timed here, on the hot path: a world detects its own
        # hung connections (PostgreSQL: command timeout and TCP keepalives).
        self._call_timeout = max(lease_seconds / 3, 2.0)
        self.failure: WorldMisconfiguredError | None = None
        """The error that stopped this worker, if the world cannot be used."""
        self._schedules = ScheduleLoop(
            world,
            self.worker_id,
            lambda: frozenset(self._workflows),
            lease_seconds=lease_seconds,
            poll_interval=poll_interval,
            complaints=Complaints(log, self.worker_id),
            fail=self._fail,
        )

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
        # client calls without world= now check against it, and start() hands
        # this worker the first task of the runs it can run
        serve_world(self.world, self)
        self._thread = threading.get_ident()
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._dispatch)
        self._task_group.start_soon(self._renew_leases)
        self._task_group.start_soon(self._watch_cancellations)
        self._task_group.start_soon(self._schedules.run, lambda: self._stopping)
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
            stop_serving_world(self.world, self)

    async def run(self) -> None:
        """Run until ``stop()``, then shut down gracefully.

        Raises:
            WorldMisconfiguredError: the world cannot be used and waiting will
                not help (read-only, schema newer than this code, ...).
        """
        async with self:
            await self._stop_requested.wait()
        if self.failure is not None:
            raise self.failure

    def stop(self) -> None:
        """Stop leasing and make ``run()`` shut down: in-flight work gets
        ``shutdown_grace`` seconds to finish, then is released to other workers."""
        self._stopping = True
        self._capacity.set()
        self._stop_requested.set()

    def reserve(self, world: World, workflow: str) -> bool:
        """Hold a slot for a run of ``workflow`` that ``start`` is creating in this
        worker's world, on this worker's thread; False if it cannot take it."""
        if (
            world is not self.world
            or self._stopping
            or self._task_group is None
            or workflow not in self._workflows
            or self._thread != threading.get_ident()
            or self._free_slots() + self._leasing <= 0
        ):
            return False
        self._reserved += 1
        return True

    def first_task(self, request: CreateRunRequest) -> CreateRunRequest:
        """``request`` leased to this worker, with the run's first workflow task run
        ahead against the ``RunCreated`` it will have, so that starting the run
        and its first task are one transaction (not when the task must wait for
        a unique claim or a hook token, or would close the run: then only the
        lease)."""
        request = msgspec.structs.replace(
            request, lease_to=self.worker_id, lease_seconds=self.lease_seconds
        )
        at = self.world.now()
        created = RunCreated(
            workflow=request.workflow,
            args=request.args,
            attributes=dict(request.attributes),
            seq=1,
            at=at,
        )
        instance = WorkflowInstance(request.run_id, self._workflows[request.workflow], self.world)
        try:
            instance.feed([created])
            blocked = instance.advance()
            commit = instance.take_commit()
        except Exception:
            blocked = True
        # A run that would close in its first task is left to be started (and
        # cancelled, say) as it always was, and one that starts children creates
        # them before its commit: only their lease is eager.
        if blocked or instance.finished or commit.children:
            instance.dispose()
            return request
        self._steps.update(instance.step_definitions)
        schedule, extra_slots = self._mark_eager(commit.schedule)
        self._reserved += extra_slots
        self._early[request.run_id] = (instance, extra_slots)
        first = FirstTask(events=tuple(commit.events), schedule=schedule, at=at)
        return msgspec.structs.replace(request, first=first)

    def adopt(self, request: CreateRunRequest, created: CreateRunResult | None) -> None:
        """Run what creating ``request`` leased to this worker, in the slots
        ``reserve`` and ``first_task`` held, and cache the run's workflow if its
        first task was committed with it. What comes after the worker closed is
        left to its lease's expiry."""
        instance, extra_slots = self._early.pop(request.run_id, (None, 0))
        self._reserved -= 1 + extra_slots
        items: list[WorkItem] = []
        first = None if created is None else created.first
        if instance is not None and first is not None and first.ok:
            items = list(first.leased)
            instance.committed(first.events)
            if instance.finished or self._task_group is None:
                instance.dispose()
            else:
                self._keep(instance)
        else:
            if instance is not None:
                instance.dispose()
            if created is not None and created.leased is not None:
                items = [created.leased]
        if self._task_group is not None:
            for item in items:
                self._spawn(item)
        self._capacity.set()

    def _fail(self, error: WorldMisconfiguredError) -> None:
        if self.failure is None:
            self.failure = error
            log.error("worker %s stops: %s", self.worker_id, error)
        self.stop()

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
            log.warning(
                "worker %s releases %d unfinished item(s) after the %.1f s grace period",
                self.worker_id,
                len(held),
                self.shutdown_grace,
            )
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                try:
                    await self._mark_released([item for item in held if item.kind == "step"])
                    await self.world.release(self.worker_id, held)
                except Exception as exc:
                    self._complaints.failed("release its leases", exc, None)
        for instance in self._cache.values():
            instance.dispose()
        self._cache.clear()

    async def _mark_released(self, steps: list[WorkItem]) -> None:
        """Record that these attempts were given back, so they do not count
        against the step's ``max_retries`` as a lost lease would."""
        for item in steps:
            released = StepDiscarded(step=item.number, attempt=item.attempt, outcome=RELEASED)
            await self.world.commit(
                CommitRequest(
                    run_id=item.run_id,
                    worker_id=self.worker_id,
                    lease=item,
                    events=(released,),
                    ack=False,
                )
            )

    # ------------------------------------------------------------------ dispatch

    async def _dispatch(self) -> None:
        assert self._task_group is not None
        backoff = Backoff(cap=self.lease_seconds / 6)
        while not self._stopping:
            free = self._free_slots()
            if free <= 0:
                self._capacity = anyio.Event()
                await self._capacity.wait()
                continue
            self._reserved += free
            self._leasing = free  # runs started here meanwhile may take these slots
            try:
                # shielded: a lease the world granted is released below if the worker
                # stops meanwhile, never dropped half-way (held until it expired)
                with anyio.CancelScope(shield=True):
                    items = await self.world.lease(
                        self.worker_id,
                        names=self.names,
                        limit=free,
                        lease_seconds=self.lease_seconds,
                    )
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                # The world is unreachable for now (a restarted database, say):
                # keep the worker alive and ask again after a pause.
                delay = max(backoff.next(), self.poll_interval)
                self._complaints.failed("lease work", exc, delay)
                await anyio.sleep(delay)
                continue
            finally:
                self._reserved -= free
                self._leasing = 0
            backoff.reset()
            self._complaints.succeeded()
            if self._stopping:
                with anyio.CancelScope(shield=True):
                    await self.world.release(self.worker_id, items)
                return
            room = max(self._free_slots(), 0)
            if len(items) > room:  # runs started here took slots while we leased
                with anyio.CancelScope(shield=True):
                    try:
                        await self.world.release(self.worker_id, items[room:])
                    except Exception as exc:
                        self._complaints.failed("release its leases", exc, None)
                items = items[:room]
            for item in items:
                self._spawn(item)
            if not items:
                try:
                    with anyio.move_on_after(self.poll_interval + 1.0):
                        await self.world.wait(WORK_TOPIC, self.poll_interval)
                except Exception:
                    await anyio.sleep(self.poll_interval)

    def _free_slots(self) -> int:
        return self.concurrency - len(self._in_flight) - self._reserved

    def _forget(self, item: WorkItem) -> None:
        """Drop ``item`` from the in-flight table, unless its id was leased again
        (a retry of the same step) and the entry is the newer lease's."""
        entry = self._in_flight.get(item.id)
        if entry is not None and entry[0].token == item.token:
            del self._in_flight[item.id]

    def _spawn(self, item: WorkItem) -> None:
        assert self._task_group is not None
        self._in_flight[item.id] = (item, anyio.CancelScope())
        self._task_group.start_soon(self._process, item)

    async def _process(self, item: WorkItem | None) -> None:
        while item is not None:
            try:
                leased = await self._execute(item)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                else:
                    self._complaints.failed(f"finish {describe_work(item)}", exc, None)
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
        backoff = Backoff(cap=interval)
        delay = interval
        while True:
            await anyio.sleep(delay)
            delay = interval
            entries = list(self._in_flight.values())
            if not entries:
                continue
            try:
                with anyio.fail_after(self._call_timeout):
                    alive = await self.world.renew_leases(
                        self.worker_id, [item for item, _ in entries], self.lease_seconds
                    )
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    self._fail(fatal)
                    return
                delay = backoff.next()
                self._complaints.failed("renew its leases", exc, delay)
                continue
            backoff.reset()
            self._complaints.succeeded()
            for (item, scope), ok in zip(entries, alive, strict=True):
                if not ok and item.kind == "step":
                    scope.cancel()

    async def _watch_cancellations(self) -> None:
        """Stop in-flight steps of runs that were cancelled (or closed) within about
        a second: a read of their runs' status, only while steps are in flight."""
        seen: set[str] = set()
        while True:
            await anyio.sleep(CANCEL_CHECK_SECONDS)
            current = [(i, scope) for i, scope in self._in_flight.values() if i.kind == "step"]
            # only steps in flight for a whole tick: most steps finish before one ends
            steps = [(item, scope) for item, scope in current if item.id in seen]
            seen = {item.id for item, _ in current}
            if not steps:
                continue
            try:
                records = [
                    await self.world.get_run(run_id) for run_id in {i.run_id for i, _ in steps}
                ]
            except Exception:
                continue  # the renewal loop reports trouble with the world
            stopped = {
                record.id
                for record in records
                if record is not None and record.status in _STOPS_STEPS
            }
            for item, scope in steps:
                if item.run_id in stopped:
                    scope.cancel()

    # ------------------------------------------------------------------ execution

    async def _execute(self, item: WorkItem) -> list[WorkItem]:
        if item.kind == "workflow":
            return await self._retry_workflow_task(item)
        if item.kind == "timer":
            request = timer_commit(item, self.worker_id, self.lease_seconds, not self._stopping)
            leased = await self._commit(item, request)
            if _observe.current() is not None and any(map(closes_run, request.events)):
                await report_closed_by_timer(self.world, item.run_id, request.events[-1])
            return leased
        step = self._steps.get(item.name)
        if step is None:
            await self.world.release(self.worker_id, [item])
            return []
        scope = self._in_flight[item.id][1]
        if await attempts_exhausted(self.world, item, step):
            # earlier attempts lost their leases (a crashed worker, a commit that
            # kept failing): they count, so max_retries holds
            request = exhausted_commit(
                item,
                step.retry.max_retries,
                self.worker_id,
                self.lease_seconds,
                not self._stopping,
            )
            return await self._commit(item, request)
        # the run this step wakes continues in the step's own slot, unless stopping
        cached = self._cache.get(item.run_id)
        request = await run_step(
            self.world,
            self.worker_id,
            item,
            step,
            scope,
            self.lease_seconds,
            not self._stopping,
            None if cached is None else cached.run_metadata(),
        )
        combined = await self._commit_with_workflow(item, request)
        if combined is not None:
            return combined
        return await self._commit(item, request)

    async def _commit_with_workflow(
        self, item: WorkItem, request: CommitRequest
    ) -> list[WorkItem] | None:
        """One transaction per step: ``_one_transaction.commit_with_workflow``."""
        return await commit_with_workflow(self, item, request)

    def _keep(self, instance: WorkflowInstance) -> None:
        """Cache ``instance`` as its run's newest, evicting the least recently used."""
        self._cache[instance.run_id] = instance
        while len(self._cache) > self._cache_size:
            _, evicted = self._cache.popitem(last=False)
            evicted.dispose()

    async def _commit(self, item: WorkItem, request: CommitRequest) -> list[WorkItem]:
        """Commit the outcome of ``item``, riding out a world that is unavailable.

        A transient error is retried with backoff for as long as the lease is
        ours (the world refuses a commit under a lost lease, so a retry never
        records twice). A commit that fails otherwise ``POISON_LIMIT`` times in
        a row is replaced by a step failure naming the cause.
        """
        backoff = Backoff(cap=self.lease_seconds / 6)
        doing = f"commit {describe_work(item)}"
        poisoned = 0
        while True:
            try:
                result = await self._committer.commit(request)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    raise fatal from exc
                if not is_transient(exc):
                    poisoned += 1
                    if poisoned >= POISON_LIMIT:
                        if item.kind != "step" or request.events == ():
                            raise
                        self._complaints.failed(doing, exc, None)
                        request = poisoned_step_commit(item, request, exc, not self._stopping)
                        poisoned = -POISON_LIMIT  # the replacement gets its own tries
                        continue
                delay = backoff.next()
                self._complaints.failed(doing, exc, delay)
                await anyio.sleep(delay)
                continue
            self._complaints.succeeded()
            if result.lease_lost:
                self._lease_lost(item, bool(result.events), result.lease_holder)
            return list(result.leased)

    def _lease_lost(self, item: WorkItem, recorded: bool, holder: str | None) -> None:
        """Say that a result was refused; a world records it as ``StepDiscarded``
        unless an earlier try of this very commit had landed (then all is well)."""
        if recorded:
            now_held = "nobody holds it now" if holder is None else f"worker {holder} holds it now"
            log.warning(
                "worker %s: the result of %s was refused and discarded: its lease was lost"
                " (%s: it ran past its lease, or its run was cancelled)",
                self.worker_id,
                describe_work(item),
                now_held,
            )

    async def _retry_workflow_task(self, item: WorkItem) -> list[WorkItem]:
        """Run a workflow task; if the world fails under it, replay it afresh while
        the lease is ours (a replay finds whatever part of it had been committed).
        A task that fails otherwise ``POISON_LIMIT`` times fails its run."""
        backoff = Backoff(cap=self.lease_seconds / 6)
        doing = f"run {describe_work(item)}"
        poisoned = 0
        while True:
            try:
                return await self._run_workflow_task(item)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    raise fatal from exc
                if not is_transient(exc):
                    poisoned += 1
                    if poisoned >= POISON_LIMIT:
                        self._complaints.failed(doing, exc, None)
                        request = poisoned_run_commit(item, exc, self.worker_id, self.lease_seconds)
                        return await self._commit(item, request)
                delay = backoff.next()
                self._complaints.failed(doing, exc, delay)
                await anyio.sleep(delay)
            if not await self._still_ours(item):
                return []

    async def _still_ours(self, item: WorkItem) -> bool:
        """Renew ``item``'s lease; False if it was lost (or the item finished)."""
        try:
            with anyio.fail_after(self._call_timeout):
                alive = await self.world.renew_leases(self.worker_id, [item], self.lease_seconds)
        except Exception:
            return True  # still unreachable: the next try will tell
        return alive[0]

    async def _run_workflow_task(self, item: WorkItem) -> list[WorkItem]:
        instance = self._cache.pop(item.run_id, None)
        try:
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
            closing: EventKind | None = None
            while True:
                blocked = instance.advance()
                commit = instance.take_commit()
                await create_children(self.world, commit.events, commit.children)
                self._steps.update(instance.step_definitions)
                schedule, extra_slots = self._mark_eager(commit.schedule)
                self._reserve(item, extra_slots)
                result = await self._committer.commit(
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
                closing = closing or next((e for e in result.events if closes_run(e)), None)
                if not blocked:
                    break
        except BaseException:
            if instance is not None:
                instance.dispose()  # a half-committed task is replayed from the log
            raise
        if closing is not None and _observe.current() is not None:
            _observe.run_closed(closed_report(instance, closing))
        if instance.finished:
            instance.dispose()
        else:
            self._keep(instance)
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
