"""``TestEnvironment``: run workflows in a test, on a memory world whose clock skips.

The environment owns a ``MemoryWorld`` whose clock is virtual (the wall clock
plus an offset the environment moves) and an in-process ``Worker`` on it. While
nothing can make progress (no work item is due or held by the worker) and a
timer or a retry is scheduled later, the clock jumps to it: a workflow that
sleeps 30 days finishes in milliseconds, with the same events, attributes and
timer semantics as in production.

It reaches the engine only through the public API (``workflow.Worker``, the
client functions with ``world=``): the layering contract in ``pyproject.toml``
holds it to that.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Self, TypeVar

import anyio
import anyio.abc

from workflow import Run, Worker, import_runs, replay, resume_hook, start
from workflow._task_groups import exit_task_group
from workflow.decorators import StepDefinition, WorkflowDefinition, defined_workflows
from worlds.archive import DumpedRun
from worlds.memory import MemoryWorld
from worlds.semantics import PARENT_KEY

__all__ = ["TestEnvironment"]

R = TypeVar("R")

_SKIP_CHECK_SECONDS = 0.002
"""Real seconds between two looks at whether the clock may jump."""

_CALM_CHECKS = 3
"""Looks in a row that must find the world quiet before the clock jumps: a step
that has just finished may need a moment to commit its outcome."""

_replaced: dict[StepDefinition[..., Any], Callable[..., Any]] = {}
"""Steps replaced by an open environment, with their real bodies."""


async def _run_ids(world: MemoryWorld) -> list[str]:
    """The ids of the runs ``world`` holds, in id order."""
    return [row.record.id async for row in world.export_rows() if isinstance(row, DumpedRun)]


class _Clock:
    """The wall clock plus an offset that only grows."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


def _stand_in(real: StepDefinition[..., Any], fake: Callable[..., Any]) -> Callable[..., Any]:
    """A body that calls ``fake`` but has the real body's name, signature and annotations,
    so arguments and results are decoded exactly as for the real step."""
    if inspect.iscoroutinefunction(fake):

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await fake(*args, **kwargs)

        return functools.update_wrapper(run_async, real.fn)

    def run_sync(*args: Any, **kwargs: Any) -> Any:
        return fake(*args, **kwargs)

    return functools.update_wrapper(run_sync, real.fn)


class TestEnvironment:
    """A world and a worker for tests, with a clock that skips ahead when all runs wait.

    ::

        async with TestEnvironment(workflows=[checkout], steps={charge: fake_charge}) as env:
            run = await env.start(checkout, "o-1", 1999)
            assert await run.result() == "paid"

    Args:
        workflows: ``@workflow``/``@step`` functions or modules the worker runs
            (as for ``Worker``); ``start`` also registers the workflow it starts.
        steps: ``{real_step: fake}`` replaces the body of ``real_step`` while the
            environment is open. The workflow code is unchanged, and the step
            keeps its name, retries, timeout and metadata; ``fake`` is an
            ``async def`` or a plain ``def`` (run in a thread, as a plain step is).
        skip_time: jump the clock to the next timer or retry whenever nothing
            else can make progress. With ``False`` the clock follows the wall
            clock and moves ahead only through ``advance``.
        start_time: where the clock starts (aware); by default the wall clock's now.
        worker_options: keyword arguments for the ``Worker`` (``concurrency``, ...).

    Every ``@workflow`` defined in the process is known: a child workflow or a
    schedule's workflow not passed in ``workflows`` is registered when its run is
    due (a run of a workflow no module defines is cancelled with a reason naming
    it). Schedules follow this clock: ``create_schedule(..., world=env.world)``
    takes its first fire time from it, and ``advance`` stops at every timer and
    fire time on its way, so each fire it passes over happens. The skipping clock
    also stops at each fire before the timer it jumps to, but a schedule alone
    never moves it (it would fire forever): move it with ``advance``.

    Time skipping is decided on the world alone: while a run waits for a hook
    and nothing else is scheduled, the clock stands still. A run that races a
    hook against a timer therefore sees the timer fire at once; drive such a
    test with ``skip_time=False`` and ``advance``. Timers and run timeouts
    (``start(..., timeout=)``) follow this clock; a step's retry delay counts
    from the wall clock (the worker sets it), so once the clock has moved ahead
    a retry is due at once: retries keep their number, not their spacing.
    """

    __test__ = False  # not a pytest test class, despite its name

    def __init__(
        self,
        *,
        workflows: Iterable[Any] = (),
        steps: Mapping[StepDefinition[..., Any], Callable[..., Any]] | None = None,
        skip_time: bool = True,
        start_time: datetime | None = None,
        worker_options: Mapping[str, Any] | None = None,
    ) -> None:
        replacements = dict(steps or {})
        for real, fake in replacements.items():
            if not isinstance(real, StepDefinition):
                raise TypeError(f"steps= maps @step functions to fakes; {real!r} is no @step")
            if not callable(fake):
                raise TypeError(f"the fake for {real!r} must be callable, got {fake!r}")
        if start_time is not None and start_time.tzinfo is None:
            raise ValueError(f"start_time must be timezone-aware, got {start_time!r}")
        self._clock = _Clock()
        if start_time is not None:
            self._clock.offset = start_time - datetime.now(UTC)
        self.skip_time = skip_time
        """Whether the clock skips; may be changed while the environment is open."""
        self._world = MemoryWorld("memory://", clock=self._clock)
        self._functions = list(workflows)
        self._steps = replacements
        self._worker_options: dict[str, Any] = {"poll_interval": 0.05, "shutdown_grace": 1.0}
        self._worker_options.update(worker_options or {})
        self._worker: Worker | None = None
        self._group: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ public API

    @property
    def world(self) -> MemoryWorld:
        """The world under test (a memory world); pass it as ``world=`` to client calls."""
        return self._world

    @property
    def worker(self) -> Worker:
        """The worker running this environment's workflows and steps.

        Raises:
            RuntimeError: the environment is not open (use ``async with``).
        """
        if self._worker is None:
            raise RuntimeError(
                "the TestEnvironment is not open: use `async with TestEnvironment()`"
            )
        return self._worker

    def now(self) -> datetime:
        """The environment's clock: what ``workflow.now()`` and timers go by."""
        return self._clock()

    async def advance(self, by: timedelta | float) -> None:
        """Move the clock ahead by ``by`` (a ``timedelta`` or seconds), and run what falls due.

        First waits until ``wait_idle`` says nothing can run without the clock (so
        a run started just before has created its timer), then moves the clock to
        each timer, retry or schedule fire due on the way and waits until idle
        there (so each happens at its own time, in order), then to the end, and
        waits until idle again (so what fell due has run when this returns).

        Raises:
            ValueError: ``by`` is negative (the clock never goes back).
        """
        delta = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if delta < timedelta(0):
            raise ValueError(f"advance() moves the clock forward only, got {by!r}")
        await self.wait_idle()
        target = self._clock() + delta
        # stop at each due time on the way, so every timer and schedule fire passed
        # over happens at its own time, in order (none falls out of a catch-up window)
        while (due := self._next_due()) is not None and due <= target:
            await self._move_to(due)
        await self._move_to(target)

    async def wait_idle(self) -> None:
        """Wait until no work is due or in flight: every run has closed or waits for
        a timer, a retry or a hook. Bound it with ``anyio.fail_after`` if a step may hang."""
        calm = 0
        while calm < _CALM_CHECKS:
            await anyio.sleep(_SKIP_CHECK_SECONDS)
            calm = 0 if self._busy() else calm + 1

    async def start(self, fn: WorkflowDefinition[..., R], *args: Any, **options: Any) -> Run[R]:
        """``workflow.start`` on this environment's world; the workflow is registered first.

        Takes every keyword option of ``start`` (``attributes=``, ``timeout=``, ...).
        """
        if "world" in options:
            raise TypeError("TestEnvironment.start() always uses env.world; drop world=")
        timeout = options.get("timeout")
        if timeout is not None:
            # ``start`` counts a run's timeout from the wall clock; count it from this clock
            seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
            if seconds > 0:
                options["timeout"] = seconds + max(self._clock.offset.total_seconds(), 0.0)
        if isinstance(fn, WorkflowDefinition):
            self.worker.register(fn)
        return await start(fn, *args, world=self._world, **options)

    async def resume_hook(
        self, token: str, payload: Any = None, *, resume_id: str | None = None
    ) -> Run[Any]:
        """``workflow.resume_hook`` on this environment's world.

        First waits until ``wait_idle``, so a run just started has created the
        hook it is about to wait on.

        Raises:
            HookNotFoundError: no open run holds ``token`` once all runs are idle.
        """
        await self.wait_idle()
        return await resume_hook(token, payload, resume_id=resume_id, world=self._world)

    def register(self, fn: Any) -> None:
        """Let the worker run another ``@workflow``/``@step`` function or module."""
        self.worker.register(fn)

    async def replay(
        self, fn: WorkflowDefinition[..., Any], history: Any, *, run_id: str | None = None
    ) -> None:
        """``workflow.replay``: ``fn`` against a recorded ``history`` (events, an
        ``encode_history`` log, or an exported run: an ``ArchivedRun`` or one line of
        ``export_runs``), without any world.

        Raises:
            NonDeterminismError: today's code makes other calls than the history.
        """
        await replay(fn, history, run_id=run_id)

    async def import_runs(self, fp: Any) -> list[Run[Any]]:
        """Load the runs ``export_runs`` wrote (a file or a path) into this environment's
        world, ids kept; open ones carry on here, on the virtual clock. Their workflows
        must be registered (``register``) to run. Returns their handles.
        """
        before = set(await _run_ids(self._world))
        await import_runs(fp, world=self._world)
        after = await _run_ids(self._world)
        return [Run(run_id, world=self._world) for run_id in after if run_id not in before]

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        for real in self._steps:
            if real in _replaced:
                raise RuntimeError(f"{real!r} is already replaced by another open TestEnvironment")
        for real, fake in self._steps.items():
            _replaced[real] = real.fn
            real.fn = _stand_in(real, fake)
            real.is_async = inspect.iscoroutinefunction(real.fn)
        try:
            worker = Worker(self._world, self._functions, **self._worker_options)
            await worker.__aenter__()
        except BaseException:
            self._restore_steps()
            raise
        self._worker = worker
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        group.start_soon(self._skip_time)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> bool | None:
        # like the worker's, an error raised in the block leaves as itself
        try:
            if self._group is not None:
                self._group.cancel_scope.cancel()
                await exit_task_group(self._group, None, None, None)
            if self._worker is not None:
                return await self._worker.__aexit__(exc_type, exc, tb)
            return None
        finally:
            self._group = None
            self._worker = None
            self._restore_steps()

    def _restore_steps(self) -> None:
        for real in self._steps:
            body = _replaced.pop(real, None)
            if body is not None:
                real.fn = body
                real.is_async = inspect.iscoroutinefunction(body)

    # ------------------------------------------------------------------ time skipping

    def _served(self) -> frozenset[str]:
        return self._worker.names if self._worker is not None else frozenset()

    def _busy(self) -> bool:
        return self._world.busy(self._served())

    def _next_due(self) -> datetime | None:
        """The earliest of the next timer or retry and the next schedule fire."""
        work = self._world.next_due()
        fire = self._world.next_schedule_wake(self._served())
        return min((t for t in (work, fire) if t is not None), default=None)

    async def _move_to(self, moment: datetime) -> None:
        """Move the clock to ``moment`` (never back) and wait until what fell due has run."""
        gap = moment - self._clock()
        if gap > timedelta(0):
            self._clock.offset += gap
        self._world.clock_moved()
        await self.wait_idle()

    async def _adopt_missing(self) -> None:
        """Register each workflow a run or schedule waits for that the worker does not
        run (a child workflow nobody passed, say); cancel a run whose workflow this
        process does not define, with a reason that names it."""
        served = self._served()
        waiting = self._world.waiting_runs()
        wanted = (set(waiting) | self._world.scheduled_workflows()) - served
        for name in sorted(wanted):
            chosen = await self._definition(name, sorted(waiting.get(name, ())))
            if chosen is not None:
                self.worker.register(chosen)
                self._world.clock_moved()
                continue
            found = len(defined_workflows(name))
            reason = (
                f"workflow {name!r} is defined {found} times in this process: pass the one "
                "to run to TestEnvironment(workflows=[...])"
                if found
                else f"no @workflow named {name!r} is defined in this process: import its "
                "module and pass it to TestEnvironment(workflows=[...])"
            )
            for run_id in sorted(waiting.get(name, ())):
                await self._world.cancel_run(run_id, reason)

    async def _definition(
        self, name: str, run_ids: list[str]
    ) -> WorkflowDefinition[..., Any] | None:
        """The definition of workflow ``name``: the only one, or the one a waiting run's
        parent workflow can see."""
        found = defined_workflows(name)
        if len(found) == 1:
            return found[0]
        for run_id in run_ids:
            record = await self._world.get_run(run_id)
            parent_id = record.attributes.get(PARENT_KEY) if record is not None else None
            parent = await self._world.get_run(parent_id) if isinstance(parent_id, str) else None
            seen = self._known(parent.workflow) if parent is not None else None
            if seen is not None:
                visible = [d for d in found if any(d is v for v in seen.values())]
                if len(visible) == 1:
                    return visible[0]
        return None

    def _known(self, name: str) -> dict[str, Any] | None:
        """The module globals of the definition the worker runs as workflow ``name``."""
        for definition in defined_workflows(name):
            try:
                self.worker.register(definition)  # a no-op for the one it runs
            except ValueError:  # another definition is registered under that name
                continue
            return dict(getattr(definition.fn, "__globals__", {}))
        return None

    async def _skip_time(self) -> None:
        calm = 0
        while True:
            await anyio.sleep(_SKIP_CHECK_SECONDS)
            await self._adopt_missing()
            if not self.skip_time or self._busy():
                calm = 0
                continue
            # the clock skips only while a run waits for a timer or a retry: schedules
            # alone would move it forever; ``advance`` moves it past their fires
            if self._world.next_due() is None:
                calm = 0
                continue
            due = self._next_due()
            calm += 1
            if calm < _CALM_CHECKS or due is None:
                continue
            calm = 0
            gap = due - self._clock()
            if gap > timedelta(0):
                self._clock.offset += gap
            self._world.clock_moved()
