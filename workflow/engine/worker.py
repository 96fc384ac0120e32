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

The worker is built from parts that each own their state: what it runs
(``_registry``), its slots (``_capacity``), the sticky cache
(``_sticky_cache``), its commits (``_committer``), the eager start of runs
started in this process (``_eager_start``), its workflow tasks
(``_workflow_tasks``, driven by ``_task.run_task``) and the commit of a step
with its workflow's next task (``_one_transaction``). This class leases work,
keeps the leases alive, and hands each item to the part that runs it.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import types
import uuid
from collections.abc import Iterable
from typing import Any, Self

import anyio

from workflow import _observe, _runtime
from workflow._task_groups import exit_task_group
from workflow.engine._capacity import Capacity
from workflow.engine._commits import (
    closing_event,
    describe_work,
    exhausted_commit,
    report_closed_by_timer,
    timer_commit,
)
from workflow.engine._committer import Committer
from workflow.engine._eager_start import EagerStart
from workflow.engine._failures import with_handler
from workflow.engine._faults import Backoff, Complaints, is_fatal, riding_out
from workflow.engine._heartbeat import Heartbeat
from workflow.engine._idle import IdleWait
from workflow.engine._one_transaction import StepWithWorkflow
from workflow.engine._registry import Registry
from workflow.engine._retention import RetentionLoop
from workflow.engine._schedules import ScheduleLoop
from workflow.engine._step import RELEASED, attempts_exhausted, run_step
from workflow.engine._sticky_cache import StickyCache
from workflow.engine._task import EagerSteps
from workflow.engine._transaction_steps import TransactionSteps
from workflow.engine._workflow_tasks import WorkflowTasks
from workflow.errors import WorkerFencedError
from workflow.transactions import TransactionDefinition
from worlds.codec import check_plain_write
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, World
from worlds.types import CommitRequest, RunStatus, StepDiscarded, WorkItem

__all__ = ["Worker"]

log = logging.getLogger("workflow.worker")

LIVENESS_FLOOR = 10.0
"""The shortest default liveness window: a worker is declared dead only after this
long without a heartbeat while others beat, however short its leases (a busy host
delays a heartbeat by seconds; short leases are for fast retries, not fast verdicts)."""

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
        lease_seconds: how long a lease lasts unless renewed.
        liveness_seconds: the worker's liveness window (default: ``lease_seconds``,
            at least ``LIVENESS_FLOOR``, 10 s).
            The worker registers in the world and heartbeats a few times per
            window; work it holds is taken over once the world declares it
            dead: no heartbeat for this long while other workers were seen
            beating (a world-wide freeze or outage expires nobody). A worker
            declared dead is fenced: ``run()`` raises ``WorkerFencedError``.
        build_id: the build this worker runs, shown by ``wf workers list``
            (default: ``$WORKFLOW_BUILD_ID``, if set). With one, runs are pinned
            (RFC 0025): a run records the build that ran its first task and,
            unless its workflow says ``pin="latest"``, only workers of that build
            lease its tasks; new runs go to the newest build. The world refuses a
            worker whose workflows' names differ from those recorded for its build.
        poll_interval: longest idle wait before asking the world for work again,
            unless the world can tell that nothing changed (``World.wait_idle``:
            it wakes the worker when something may be due).
        shutdown_grace: on close, how long in-flight work may take to finish
            before it is cancelled and its leases released.
        cache_size: how many suspended workflows to keep in memory.
        retention_interval: seconds between this worker's sweeps of the world's
            retention windows (``set_retention``; once at start too), pruning
            the closed runs past them in batches; ``None``: never.

    A world that is unavailable for a while (a restarted database, a lock held
    too long) or full (a full disk) is waited out with capped exponential
    backoff, the worker keeping its leases; a finished step's result is
    committed as soon as the world is back (or has room), for as long as its
    lease is still this worker's. A world that cannot heal by waiting
    (read-only, schema too new, authentication failed, its SQLite file deleted
    or replaced) stops the worker: ``run()`` raises the
    ``WorldMisconfiguredError`` and ``failure`` holds it.
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
        liveness_seconds: float | None = None,
        build_id: str | None = None,
        retention_interval: float | None = 60.0,
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
        self.failure: WorldMisconfiguredError | None = None
        """The error that stopped this worker, if the world cannot be used."""
        self.fenced = False
        """Whether the world declared this worker dead (and it stopped)."""
        self.build_id = build_id if build_id is not None else os.environ.get("WORKFLOW_BUILD_ID")
        """The build this worker runs (RFC 0025), or ``None``: its runs are not pinned."""
        self._registry = Registry()
        for fn in functions:
            self._registry.register(fn)
        self._capacity = Capacity(concurrency)
        self._cache = StickyCache(cache_size)
        self._complaints = Complaints(log, self.worker_id)
        self._committer = Committer(
            world, self.worker_id, lease_seconds, self._capacity, self._complaints
        )
        # Longest wait for a renewal before it counts as failed. Leasing and
        # commits are not timed here, on the hot path: a world detects its own
        # hung connections (PostgreSQL: command timeout and TCP keepalives).
        self._call_timeout = max(lease_seconds / 3, 2.0)
        eager = EagerSteps(self._registry, self._capacity)
        self._workflow_tasks = WorkflowTasks(
            world,
            self.worker_id,
            lease_seconds,
            self._call_timeout,
            self._registry,
            self._cache,
            self._capacity,
            eager,
            self._committer,
            self._complaints,
        )
        self._step_with_workflow = StepWithWorkflow(
            world, self._cache, self._capacity, eager, self._committer
        )
        self._transaction_steps = TransactionSteps(
            world, self._committer, self._step_with_workflow, lease_seconds, self.build_id
        )
        self._eager_start = EagerStart(
            world,
            self.worker_id,
            lease_seconds,
            self._registry,
            self._capacity,
            self._cache,
            eager,
        )
        self._idle = IdleWait(world)
        self._schedules = ScheduleLoop(
            world,
            self.worker_id,
            lambda: self._registry.workflow_names,
            lease_seconds=lease_seconds,
            poll_interval=poll_interval,
            idle=self._idle,
            complaints=self._complaints,  # one outage per worker, whichever loop sees it
            fail=self._fail,
        )
        if retention_interval is not None and not retention_interval > 0:
            raise ValueError(f"retention_interval must be > 0 seconds, got {retention_interval}")
        self._retention = RetentionLoop(
            world,
            self.worker_id,
            interval=retention_interval,
            complaints=self._complaints,
            fail=self._fail,
        )
        self._heartbeat = Heartbeat(
            world,
            self.worker_id,
            liveness_seconds=(
                max(lease_seconds, LIVENESS_FLOOR) if liveness_seconds is None else liveness_seconds
            ),
            build_id=self.build_id,
            workflows=self._registry.pins,
            complaints=self._complaints,
            fail=self._fail,
            fenced=self._on_fenced,
        )
        self._stop_requested = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ registry

    def register(self, fn: Any) -> None:
        """Add a workflow, a step, or every workflow and step of a module."""
        self._registry.register(fn)
        self._idle.interrupt()  # the loops' waits were for the names they polled

    @property
    def names(self) -> frozenset[str]:
        """Names of everything this worker can run."""
        return self._registry.names

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self._check_codec()
        await self._heartbeat.register()  # before anything is leased: it follows liveness
        # client calls without world= now check against it, and start() hands
        # this worker the first task of the runs it can run
        _runtime.serve(self.world, self._eager_start)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        if self.build_id is None:  # with a build, a run's first task is leased: the
            # world records its build and sends new runs to the newest one (RFC 0025)
            self._eager_start.open(self._spawn)
        self._task_group.start_soon(self._dispatch)
        self._task_group.start_soon(self._renew_leases)
        self._task_group.start_soon(self._heartbeat.run, lambda: len(self._capacity.in_flight()))
        self._task_group.start_soon(self._watch_cancellations)
        self._task_group.start_soon(self._schedules.run, lambda: self._capacity.stopping)
        self._task_group.start_soon(self._retention.run, lambda: self._capacity.stopping)
        return self

    async def _check_codec(self) -> None:
        # a world whose payloads a codec wrote needs that codec here too: refused
        # before anything runs, rather than failing each run it cannot read. A
        # worker may start while its world is down (a database restarting): it
        # waits for the world as every other loop of a worker does, instead of dying
        check = functools.partial(check_plain_write, self.world)
        cap = max(self.lease_seconds / 6, 1.0)
        await riding_out(check, "check the world's codec", self._complaints, cap)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool | None:
        # an error raised in the block leaves as itself, not in an ExceptionGroup
        try:
            await self._shutdown()
            assert self._task_group is not None
            self._task_group.cancel_scope.cancel()
            try:
                return await exit_task_group(self._task_group, exc_type, exc, tb)
            finally:
                self._task_group = None
                self._eager_start.close()
        finally:
            _runtime.stop_serving(self.world, self._eager_start)

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
        if self.fenced:
            raise WorkerFencedError(
                f"worker {self.worker_id} was declared dead by its world and fenced"
            )

    def stop(self) -> None:
        """Stop leasing and make ``run()`` shut down: in-flight work gets
        ``shutdown_grace`` seconds to finish, then is released to other workers."""
        self._capacity.stop()
        self._stop_requested.set()

    def _fail(self, error: WorldMisconfiguredError) -> None:
        if self.failure is None:
            self.failure = error
            log.error("worker %s stops: %s", self.worker_id, error)
        self.stop()

    def _on_fenced(self) -> None:
        # the world revoked every lease this worker held: what is in flight is
        # someone else's now, so it stops at once and commits nothing more
        self.fenced = True
        self._capacity.stop()
        for _, scope in self._capacity.in_flight():
            scope.cancel()
        self._cache.clear()
        self._stop_requested.set()

    async def _shutdown(self) -> None:
        self._capacity.stop()
        with anyio.move_on_after(self.shutdown_grace, shield=True):
            while self._capacity.busy:
                await anyio.sleep(0.01)
        entries = self._capacity.in_flight()
        held = [item for item, _ in entries]
        for _, scope in entries:
            scope.cancel()
        if held and not self.fenced:  # a fenced worker holds nothing to give back
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
        self._cache.clear()
        with anyio.CancelScope(shield=True):
            await self._heartbeat.unregister()

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
        capacity = self._capacity
        backoff = Backoff(cap=self.lease_seconds / 6)
        while not capacity.stopping:
            free = capacity.free()
            if free <= 0:
                await capacity.wait_for_room()
                continue
            with capacity.leasing(free):  # runs started here meanwhile may take these
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
            backoff.reset()
            self._complaints.succeeded("lease work")
            if capacity.stopping:
                with anyio.CancelScope(shield=True):
                    await self.world.release(self.worker_id, items)
                return
            room = max(capacity.free(), 0)
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
                await self._idle.wait(WORK_TOPIC, self.names, self.poll_interval)

    def _spawn(self, item: WorkItem) -> None:
        assert self._task_group is not None
        self._capacity.start(item)
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
                self._capacity.finish(item)
            item = leased[0] if leased else None
            if item is not None:
                self._capacity.start(item)
            for extra in leased[1:]:
                self._spawn(extra)
        self._capacity.changed()

    async def _renew_leases(self) -> None:
        interval = self.lease_seconds / 3
        backoff = Backoff(cap=interval)
        delay = interval
        while True:
            await anyio.sleep(delay)
            delay = interval
            # an item whose transaction step is open is held by its row locks
            held = self._transaction_steps.open
            entries = [entry for entry in self._capacity.in_flight() if entry[0].id not in held]
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
            self._complaints.succeeded("renew its leases")
            for (item, scope), ok in zip(entries, alive, strict=True):
                if not ok and item.kind == "step":
                    scope.cancel()

    async def _watch_cancellations(self) -> None:
        """Stop in-flight steps of runs that were cancelled (or closed) within about
        a second: a read of their runs' status, only while steps are in flight."""
        seen: set[str] = set()
        while True:
            await anyio.sleep(CANCEL_CHECK_SECONDS)
            current = [(i, scope) for i, scope in self._capacity.in_flight() if i.kind == "step"]
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
            return await self._workflow_tasks.run(item)
        wake_eagerly = not self._capacity.stopping
        if item.kind == "timer":
            wake_eagerly = wake_eagerly and self._stays(item.run_id)
            request = timer_commit(item, self.worker_id, self.lease_seconds, wake_eagerly)
            if closing_event(request.events) is not None:  # a deadline fails the run
                definition = self._registry.workflow(item.name)
                request = await with_handler(request, definition, self.world)
            leased = await self._committer.commit(item, request)
            if _observe.current() is not None and closing_event(request.events) is not None:
                await report_closed_by_timer(self.world, item.run_id, request.events[-1])
            return leased
        step = self._registry.step(item.name)
        if step is None:
            await self.world.release(self.worker_id, [item])
            return []
        if await attempts_exhausted(self.world, item, step):
            # earlier attempts lost their leases (a crashed worker, a commit that
            # kept failing): they count, so max_retries holds
            retries = step.retry.max_retries
            request = exhausted_commit(
                item, retries, self.worker_id, self.lease_seconds, not self._capacity.stopping
            )
            return await self._committer.commit(item, request)
        # the run this step wakes continues in the step's own slot, unless stopping
        # or it may move to a newer build at its next task
        cached = self._cache.peek(item.run_id)
        stays = self._stays(item.run_id)
        if isinstance(step, TransactionDefinition):
            return await self._transaction_steps.run(
                item,
                step,
                self._capacity.scope(item),
                stays and not self._capacity.stopping,
                None if cached is None else cached.run_metadata(),
            )
        request = await run_step(
            self.world,
            self.worker_id,
            item,
            step,
            self._capacity.scope(item),
            self.lease_seconds,
            stays and not self._capacity.stopping,
            None if cached is None else cached.run_metadata(),
            self.build_id,
        )
        combined = await self._step_with_workflow.commit(item, request) if stays else None
        if combined is not None:
            return combined
        return await self._committer.commit(item, request)

    def _stays(self, run_id: str) -> bool:
        """Whether the run a step or timer of ``run_id`` wakes may go on here at once
        (its workflow item leased back, or run in the step's transaction): not when
        its workflow is ``pin="latest"`` on a worker with a build id, nor when that
        is unknown (the run is not cached): its next task is leased, so it moves to
        the newest build (RFC 0025)."""
        if self.build_id is None or not self._registry.moving:
            return True
        cached = self._cache.peek(run_id)
        if cached is None:
            return False
        definition = self._registry.workflow(cached.run_metadata().workflow)
        return definition is None or definition.pin == "run"


_runtime.provide_worker(Worker)  # the bulk actions drive their $bulk runs with one
