"""``start``: create a run (or, in workflow code, a child run) of a workflow.

The arguments and attributes are checked and encoded here, the world chosen
(``workflow._world_resolution``), and the run created in one world operation
that claims its unique pairs. When a Worker in this process serves that world
and runs the workflow, it runs the first task ahead and the run is created
with it (``workflow._runtime.eager_starter``, RFC 0018). In workflow code the
start is a command the engine records (``Runtime.start_child``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from workflow import _observe, _runtime
from workflow._attributes import (
    IDEMPOTENCY_KEY,
    check_pair,
    check_priority,
    split_rates,
    split_start_attributes,
)
from workflow._codec import encode_start
from workflow._run import Run
from workflow._spans import span_seconds
from workflow._world_resolution import resolve_world
from workflow.decorators import WorkflowDefinition
from workflow.errors import AttributeConflictError, RateLimitExceededError
from worlds.codec import check_plain_write
from worlds.protocol import World
from worlds.semantics import ON_PARENT_CLOSE, new_run_id
from worlds.types import CreateRunRequest

__all__ = ["start"]

R = TypeVar("R")


async def start(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    attributes: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    timeout: float | timedelta | None = None,
    delay: float | timedelta | None = None,
    on_parent_close: str = "cancel",
    priority: int = 0,
    world: World | None = None,
) -> Run[R]:
    """Create a run of workflow ``fn`` with ``args``; a worker will execute it.

    In workflow code this starts a *child run*, durably: the start is recorded
    in the parent's log (replay answers it from there and never starts the
    child twice), the child's ``get_run_metadata().parent_run_id`` names the
    parent, and ``await child.result()`` waits without holding a worker. A
    unique conflict raises ``AttributeConflictError`` in the parent, recorded
    too. ``on_parent_close`` says what happens to a child still open when the
    parent fails, is cancelled or continues as new: ``"cancel"`` (the default)
    cancels it in the same world transaction, ``"abandon"`` leaves it running.
    It has no effect outside workflow code.

    Every ``Unique`` value in ``attributes`` is claimed in the same atomic
    operation that creates the run, and every ``Limited`` value takes a slot of
    its pair (or, when the pair is full, the run waits, pending, until one
    frees; see ``Limited``). With ``delay`` (0 seconds to 100 years, the bound
    ``Unique(ttl=)`` and debouncing use too), the run stays pending that long
    before a worker starts it (a run that waits for a slot starts when it gets
    one). With ``idempotency_key``, a second start with
    the same key returns the first run instead of creating one. With
    ``timeout``, a run still open that long after its start fails with a
    ``TimeoutError`` (a durable timer in the world enforces it); a deadline
    past 9000-01-01 (``math.inf``, say) is clamped to that date, like timers.
    Every ``RateLimited`` value takes a token of its pair: the run starts when
    the pair's window allows (see ``RateLimited``). ``priority`` (an int, 0 by
    default) orders the runs waiting for the same slots or tokens: the lowest
    number is admitted first, first in first out within a number.

    Raises:
        AttributeConflictError: a unique pair is held by another run, or a
            ``Limited(..., on_full="fail")`` pair is full; nothing was created.
        RateLimitExceededError: a ``RateLimited(..., on_full="fail")`` pair's
            window is full (``retry_after`` says for how long); nothing was created.
        TypeError / ValueError: bad arguments or attributes; nothing was written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"start() needs a @workflow function, got {fn!r}")
    if on_parent_close not in ON_PARENT_CLOSE:
        raise ValueError(
            f"on_parent_close must be one of {list(ON_PARENT_CLOSE)}, got {on_parent_close!r}"
        )
    priority = check_priority(priority)
    runtime = _runtime.current_or_none()
    if runtime is not None and runtime.in_workflow:
        plain, rates = split_rates(attributes)
        values, unique, limits, windows = split_start_attributes(plain)
        if windows:
            raise ValueError(
                "a child run takes no reuse window (Unique(ttl=, release_on=)) yet; "
                "start such a run from a step, or outside the workflow"
            )
        delay_seconds = None if delay is None else span_seconds("delay", delay)
        request = _runtime.ChildRequest(
            fn.name,
            encode_start(fn, args),
            values,
            unique,
            on_parent_close,
            _child_timeout(timeout),
            limits=limits,
            rates=rates,
            delay_seconds=delay_seconds,
            priority=priority,
        )
        return await _start_child(runtime, fn, request, idempotency_key, world)
    report = _observe.StartReport()
    with _observe.starting(fn.name, attributes or {}, report) as headers:
        try:
            run = await _create(
                fn, args, attributes, idempotency_key, timeout, delay, priority, world, headers
            )
        except BaseException as exc:
            report.error = exc
            raise
        report.run_id = run.id
        return run


async def _create(
    fn: WorkflowDefinition[..., R],
    args: tuple[Any, ...],
    attributes: Mapping[str, Any] | None,
    idempotency_key: str | None,
    timeout: float | timedelta | None,
    delay: float | timedelta | None,
    priority: int,
    world: World | None,
    headers: dict[str, str],
) -> Run[R]:
    payload = encode_start(fn, args, headers)
    attributes, rates = split_rates(attributes)
    values, unique, limits, windows = split_start_attributes(attributes)
    start_at = None
    if delay is not None:
        start_at = datetime.now(UTC) + timedelta(seconds=span_seconds("delay", delay))
    if idempotency_key is not None:
        check_pair(IDEMPOTENCY_KEY, idempotency_key)
        values[IDEMPOTENCY_KEY] = idempotency_key
        unique |= {IDEMPOTENCY_KEY}
    timeout_at = None if timeout is None else _deadline(timeout)
    target = resolve_world(world)
    await check_plain_write(target)
    # a run that may wait (a slot, a start time) is not run ahead
    waits = bool(limits) or bool(rates) or start_at is not None
    starter = None if waits else _runtime.eager_starter(target, fn.name)
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=fn.name,
        args=payload,
        attributes=values,
        unique=unique,
        timeout_at=timeout_at,
        limits=limits,
        start_at=start_at,
        windows=windows,
        rates=rates,
        priority=priority,
    )
    running_here = False
    if starter is None:
        created = await target.create_run(request)
    else:
        outcome = None
        try:
            request = await starter.first_task(request)
            created = outcome = await target.create_run(request)
            running_here = created.first is not None or created.leased is not None
        finally:
            starter.adopt(request, outcome)
    if created.conflict is not None:
        refused = created.conflict
        holder: Run[R] = Run(refused.holder_run_id, world=world, workflow=fn)
        if refused.key == IDEMPOTENCY_KEY:
            return holder
        if refused.retry_after is not None and refused.key in rates:
            raise RateLimitExceededError(
                refused.key,
                refused.value,
                holder,
                limit=rates[refused.key].limit,
                per=rates[refused.key].per,
                retry_after=refused.retry_after,
            )
        raise AttributeConflictError(
            refused.key,
            refused.value,
            holder,
            limit=refused.limit,
            pruned=refused.holder_pruned,
        )
    return Run(
        request.run_id, world=world, workflow=fn, record=created.run, running_here=running_here
    )


def _deadline(timeout: float | timedelta) -> datetime:
    """Now plus ``timeout`` seconds, clamped to 9000-01-01 (far enough to mean "never")."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta):
        raise TypeError(f"timeout is seconds or a timedelta, not {type(timeout).__name__}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if math.isnan(seconds) or seconds <= 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    latest = datetime(9000, 1, 1, tzinfo=UTC)
    now = datetime.now(UTC)
    if seconds >= (latest - now).total_seconds():
        return latest
    return now + timedelta(seconds=seconds)


async def _start_child(
    runtime: _runtime.Runtime,
    fn: WorkflowDefinition[..., R],
    request: _runtime.ChildRequest,
    idempotency_key: str | None,
    world: World | None,
) -> Run[R]:
    if idempotency_key is not None:
        raise ValueError(
            "idempotency_key= is not taken inside a workflow: a child start is recorded, so "
            "it happens once already; to dedupe across runs use attributes={k: Unique(v)}"
        )
    run_id = await runtime.start_child(request)
    return Run(run_id, world=world, workflow=fn)


def _child_timeout(timeout: float | timedelta | None) -> float | None:
    """A child's ``timeout`` in seconds, checked (``None``: none)."""
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not seconds > 0:
        raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    return seconds
