"""``@workflow`` and ``@step``: mark functions as durable workflows and steps.

Decorated functions keep their signature. Called inside a running workflow, a
step is recorded and executed by a worker; called anywhere else (a unit test,
another step) it simply runs. Workers find functions by name, so a worker in
another process finds them by importing the module that defines them.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, overload

from workflow import _runtime
from workflow._attributes import check_text
from worlds.quoting import quoted
from worlds.types import Pin

__all__ = [
    "StepDecorator",
    "StepDefinition",
    "WorkflowDefinition",
    "defined_workflows",
    "step",
    "workflow",
]

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed step attempt is retried: exponential backoff with a cap."""

    max_retries: int = 3
    initial_delay: float = 1.0
    backoff: float = 2.0
    max_delay: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (from 1)."""
        return min(self.max_delay, self.initial_delay * self.backoff ** (attempt - 1))


def _check_name(decorator: str, name: object) -> str:
    """``name`` if every world can store it (a non-empty plain text), else raise."""
    if not isinstance(name, str):
        raise TypeError(f"{decorator} name must be a str, not {type(name).__name__}")
    if not name:
        raise ValueError(f"{decorator} name must not be empty")
    return check_text(f"{decorator} name {quoted(name)}", name)


class WorkflowDefinition(Generic[P, R]):
    """A function decorated with ``@workflow``; start it with ``start(fn, *args)``."""

    def __init__(
        self,
        fn: Callable[P, Awaitable[R]],
        name: str,
        on_failure: WorkflowDefinition[..., Any] | None = None,
        pin: Pin = "run",
    ) -> None:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"@workflow needs an async def function, got {quoted(fn)}")
        if on_failure is not None:
            _check_failure_handler(on_failure)
        if pin not in ("run", "latest"):
            raise ValueError(f"@workflow(pin=...) is 'run' or 'latest', not {pin!r}")
        self.fn = fn
        self.name = _check_name("@workflow", name)
        self.on_failure = on_failure
        """The workflow started as ``on_failure(run_id, error)`` after a run of this one
        fails (``@workflow(on_failure=...)``), or None."""
        self.pin: Pin = pin
        """Where a run goes on under build ids (RFC 0025): ``run`` stays on the build
        that ran its first task, ``latest`` moves to the newest build at its next task."""
        functools.update_wrapper(self, fn)
        _defined.setdefault(self.name, weakref.WeakSet()).add(self)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        """Run the body directly, not durably (handy in unit tests)."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<workflow {self.name}>"


def _check_failure_handler(handler: object) -> None:
    """Raise ``TypeError`` unless ``handler`` is a ``@workflow`` callable as ``(run_id, error)``."""
    if not isinstance(handler, WorkflowDefinition):
        raise TypeError(
            f"@workflow(on_failure=...) takes a @workflow function, got {quoted(handler)}"
        )
    try:
        inspect.signature(handler.fn).bind("run-id", {})
    except TypeError as exc:
        raise TypeError(
            f"@workflow(on_failure={handler.name}): the handler is called as "
            f"handler(run_id, error), which its signature refuses: {exc}"
        ) from None


_defined: dict[str, weakref.WeakSet[WorkflowDefinition[..., Any]]] = {}
"""Every ``@workflow`` this process has defined and still holds, by name (weakly: a
workflow defined in a function that returned is forgotten with it)."""


def defined_workflows(name: str) -> list[WorkflowDefinition[..., Any]]:
    """The ``@workflow`` definitions named ``name`` that this process holds.

    More than one when two modules define a workflow under one name; the
    testing kit uses this to run a child workflow nobody registered.
    """
    return list(_defined.get(name, ()))


class StepDefinition(Generic[P, R]):
    """A function decorated with ``@step``; await it from a workflow."""

    def __init__(
        self, fn: Callable[P, Any], name: str, retry: RetryPolicy, timeout: float | None = None
    ) -> None:
        self.fn = fn
        self.name = _check_name("@step", name)
        self.retry = retry
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
        """Record and schedule the step inside a workflow; run it directly elsewhere."""
        runtime = _runtime.current_or_none()
        if runtime is not None and runtime.in_workflow:
            return runtime.call_step(self, args, kwargs)
        return self._run_directly(*args, **kwargs)

    async def _run_directly(self, *args: Any, **kwargs: Any) -> R:
        if self.is_async:
            result: R = await self.fn(*args, **kwargs)
            return result
        return self.fn(*args, **kwargs)  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<step {self.name}>"


@overload
def workflow(fn: Callable[P, Coroutine[Any, Any, R]], /) -> WorkflowDefinition[P, R]: ...
@overload
def workflow(
    *,
    name: str | None = None,
    on_failure: WorkflowDefinition[..., Any] | None = None,
    pin: Pin = "run",
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], WorkflowDefinition[P, R]]: ...


def workflow(
    fn: Callable[P, Coroutine[Any, Any, R]] | None = None,
    /,
    *,
    name: str | None = None,
    on_failure: WorkflowDefinition[..., Any] | None = None,
    pin: Pin = "run",
) -> (
    WorkflowDefinition[P, R]
    | Callable[[Callable[P, Coroutine[Any, Any, R]]], WorkflowDefinition[P, R]]
):
    """Mark an ``async def`` as a durable workflow: ``@workflow`` or ``@workflow(name=...)``.

    The body must be deterministic: do I/O in steps, and use ``now()``,
    ``random()``, ``uuid4()`` and ``sleep()`` from this package for time and chance.

    ``on_failure=handler`` (another ``@workflow``): when a run of this workflow
    fails (its body raised, or a task kept failing), the world starts
    ``handler(run_id, error)`` as a run of its own, in the transaction that
    records the failure: exactly once per failed run, whatever crashes around
    it. ``error`` is a dict of text: ``{"type": ..., "message": ...,
    "workflow": ...}`` (the exception's class name and message, the failed
    workflow's name); the whole failure is in the failed run's log. The
    handler's run id is derived from the failed run's and it carries the
    attribute ``$on_failure_of=<run_id>``. Cancelled runs start no handler, nor
    does a failed handler run (no recursion). A Worker that runs the workflow
    runs its handler too.

    ``pin`` matters only on workers with a build id (``Worker(build_id=...)``, RFC
    0025): ``"run"`` (the default) keeps each run on workers of the build that ran
    its first task; ``"latest"`` moves it to the newest build at its next task (its
    code then replays the old history: guard changes with ``patched()``).

    Raises:
        TypeError: ``on_failure`` is not a ``@workflow``.
        ValueError: ``pin`` is not ``"run"`` or ``"latest"``.
    """

    def decorate(f: Callable[P, Coroutine[Any, Any, R]]) -> WorkflowDefinition[P, R]:

        return WorkflowDefinition(f, name or f.__qualname__, on_failure, pin)

    return decorate(fn) if fn is not None else decorate


class StepDecorator(Protocol):
    """What ``@step(...)`` with options returns: a decorator that keeps the step's types."""

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]], /) -> StepDefinition[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> StepDefinition[P, R]: ...


@overload
def step(fn: Callable[P, Coroutine[Any, Any, R]], /) -> StepDefinition[P, R]: ...
@overload
def step(fn: Callable[P, R], /) -> StepDefinition[P, R]: ...
@overload
def step(
    *,
    name: str | None = None,
    max_retries: int = 3,
    retry_delay: float = 1.0,
    backoff: float = 2.0,
    max_delay: float = 60.0,
    timeout: float | None = None,
) -> StepDecorator: ...


def step(
    fn: Callable[P, Any] | None = None,
    /,
    *,
    name: str | None = None,
    max_retries: int = 3,
    retry_delay: float = 1.0,
    backoff: float = 2.0,
    max_delay: float = 60.0,
    timeout: float | None = None,
) -> StepDefinition[P, Any] | StepDecorator:
    """Mark a function as a step: ``@step`` or ``@step(max_retries=5, ...)``.

    A step runs at least once; its result is recorded and never recomputed on
    replay. A failed attempt is retried ``max_retries`` times, waiting
    ``retry_delay * backoff ** (attempt - 1)`` seconds (at most ``max_delay``).
    A plain ``def`` step runs in a daemon thread of its own; an attempt that is
    cancelled (timeout, run closed, worker shutdown past its grace) abandons
    the thread rather than waiting for it. An attempt that takes longer
    than ``timeout`` seconds fails with ``TimeoutError`` and is retried like
    any other failure.
    """
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    if retry_delay < 0 or backoff < 1 or max_delay < 0:
        raise ValueError("retry_delay and max_delay must be >= 0 and backoff >= 1")
    policy = RetryPolicy(max_retries, retry_delay, backoff, max_delay)

    def decorate(f: Callable[P, Any]) -> StepDefinition[P, Any]:
        return StepDefinition(f, name or f.__qualname__, policy, timeout)

    if fn is not None:
        return decorate(fn)
    return decorate  # type: ignore[return-value]  # one def stands for both overloads
