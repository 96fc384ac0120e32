"""Temporal's start policies as one-line helpers over a unique attribute.

Temporal decides a duplicate start with three options; here the workflow id is
a unique attribute (``key``, ``value``) and the same options decide what
``start_with_policy`` does when another run holds it:

=========  ===========================================  ===============================
holder     options                                      result
=========  ===========================================  ===============================
running    defaults                                     the existing run, nothing starts
running    error_when_already_started                   ``RunAlreadyStartedError``
running    USE_EXISTING (even with the error flag)      the existing run
running    TERMINATE_EXISTING                           old run cancelled, new run starts
closed     defaults (ALLOW_DUPLICATE)                   a new run takes the claim
closed     REJECT_DUPLICATE                             the last run
closed     REJECT_DUPLICATE + error flag                ``RunAlreadyStartedError``
completed  ALLOW_DUPLICATE_FAILED_ONLY + error flag     ``RunAlreadyStartedError``
=========  ===========================================  ===============================

Each decision and its effect (create the new run, cancel the old one, move the
claim and bump its generation) is one world operation: no helper reads, then
decides, then writes. See ``rfcs/0004-start-policies.md``.

``start_or_debounce`` debounces over a unique pair the same way: a pending
holder gets the newest arguments and a later start (``rfcs/0008-flow-control.md``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from workflow import _observe
from workflow._attributes import check_pair, check_text, check_token, split_start_attributes
from workflow._codec import encode_result, encode_start
from workflow._spans import span_seconds
from workflow._update_calls import await_answer, new_delivery
from workflow.client import Run, resolve_world
from workflow.decorators import WorkflowDefinition
from workflow.errors import AttributeConflictError, HookConflictError, RunAlreadyStartedError
from workflow.types import Unique
from worlds.codec import check_plain_write
from worlds.protocol import World
from worlds.semantics import new_run_id
from worlds.types import AttributeValue, CreateRunRequest, Debounce, HookDelivery, StartPolicy

__all__ = [
    "ConflictPolicy",
    "ReusePolicy",
    "start_or_cancel_run",
    "start_or_debounce",
    "start_or_get_run",
    "start_or_resume_hook",
    "start_with_policy",
    "update_with_start",
]

R = TypeVar("R")


class ConflictPolicy(enum.Enum):
    """What to do when the holder of the pair is still running."""

    FAIL = "fail"
    """Refuse: return the existing run, or raise with ``error_when_already_started``."""
    USE_EXISTING = "use_existing"
    """Return the existing run, never an error."""
    TERMINATE_EXISTING = "terminate_existing"
    """Cancel the existing run and start the new one, atomically (newest wins)."""


class ReusePolicy(enum.Enum):
    """What to do when the holder of the pair has closed."""

    ALLOW_DUPLICATE = "allow_duplicate"
    """Start a new run, which takes the claim over."""
    ALLOW_DUPLICATE_FAILED_ONLY = "allow_duplicate_failed_only"
    """Start a new run only if the holder failed or was cancelled."""
    REJECT_DUPLICATE = "reject_duplicate"
    """Refuse: the pair is used up for as long as the holder is retained."""


async def start_with_policy(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    conflict: ConflictPolicy = ConflictPolicy.FAIL,
    reuse: ReusePolicy = ReusePolicy.ALLOW_DUPLICATE,
    error_when_already_started: bool = False,
    attributes: Mapping[str, Any] | None = None,
    world: World | None = None,
) -> Run[R]:
    """Start ``fn(*args)`` as the holder of the unique pair (``key``, ``value``).

    Returns the new run, or the existing one when the policy refuses the start.

    Raises:
        RunAlreadyStartedError: the policy refused and ``error_when_already_started``
            is set (never with ``USE_EXISTING`` while the holder runs).
        AttributeConflictError: another unique pair in ``attributes`` is held.
        TypeError / ValueError: bad arguments or attributes; nothing was written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"start_with_policy() needs a @workflow function, got {fn!r}")
    if not isinstance(conflict, ConflictPolicy) or not isinstance(reuse, ReusePolicy):
        raise TypeError("conflict must be a ConflictPolicy and reuse a ReusePolicy")
    key, value = check_pair(key, value)
    if attributes is not None and key in attributes:
        raise ValueError(f"{key!r} is the policy's key; do not repeat it in attributes")
    values, unique, limits, windows = split_start_attributes(
        {**(attributes or {}), key: Unique(value)}
    )
    report = _observe.StartReport()
    with _observe.starting(fn.name, values, report) as headers:
        request = CreateRunRequest(
            run_id=new_run_id(),
            workflow=fn.name,
            args=encode_start(fn, args, headers),
            attributes=values,
            unique=unique,
            limits=limits,
            windows=windows,
            policy=StartPolicy(key=key, conflict=conflict.value, reuse=reuse.value),
        )
        try:
            target = resolve_world(world)
            await check_plain_write(target)
            result = await target.create_run(request)
        except BaseException as exc:
            report.error = exc
            raise
        report.run_id = request.run_id if result.run is not None else None
    if result.run is not None:
        return Run(request.run_id, world=world, workflow=fn, record=result.run)
    refused = result.conflict
    assert refused is not None
    existing: Run[R] = Run(refused.holder_run_id, world=world, workflow=fn)
    if refused.key != key:
        raise AttributeConflictError(
            refused.key,
            refused.value,
            existing,
            limit=refused.limit,
            pruned=refused.holder_pruned,
        )
    holder_open = refused.holder_status is not None and not refused.holder_status.is_closed
    if holder_open and conflict is ConflictPolicy.USE_EXISTING:
        return existing
    if error_when_already_started:
        raise RunAlreadyStartedError(key, value, existing)
    return existing


async def start_or_get_run(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    attributes: Mapping[str, Any] | None = None,
    world: World | None = None,
) -> Run[R]:
    """The run holding (``key``, ``value``), started now if none ever did.

    ``USE_EXISTING`` + ``REJECT_DUPLICATE``: every caller, concurrent or later,
    gets the same run for as long as it is retained ("same answer forever").
    """
    return await start_with_policy(
        fn,
        *args,
        key=key,
        value=value,
        conflict=ConflictPolicy.USE_EXISTING,
        reuse=ReusePolicy.REJECT_DUPLICATE,
        attributes=attributes,
        world=world,
    )


async def start_or_cancel_run(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    attributes: Mapping[str, Any] | None = None,
    world: World | None = None,
) -> Run[R]:
    """Start a new run for (``key``, ``value``), cancelling the one running ("newest wins").

    ``TERMINATE_EXISTING``: the cancellation, the new run and the claim's move
    (with a new generation) are one atomic world operation; the superseded run
    is fenced from that moment and can start no new step.
    """
    return await start_with_policy(
        fn,
        *args,
        key=key,
        value=value,
        conflict=ConflictPolicy.TERMINATE_EXISTING,
        attributes=attributes,
        world=world,
    )


async def start_or_debounce(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    delay: float | timedelta,
    max_delay: float | timedelta,
    attributes: Mapping[str, Any] | None = None,
    world: World | None = None,
) -> Run[R]:
    """Debounce ``fn`` on the unique pair (``key``, ``value``): run it once things settle.

    If a run holding the pair has not started yet, its arguments become
    ``args`` and its start moves to now + ``delay``, but never past its first
    debounce + ``max_delay``; otherwise (no holder, or it started already) a
    run delayed by ``delay`` is created holding the pair (a holder still
    running keeps running). Atomic inside the world, whatever the number of
    concurrent callers. Every call returns the run that will execute; its
    attributes are the first call's.

    Raises:
        AttributeConflictError: another unique pair in ``attributes`` is held.
        TypeError / ValueError: bad arguments, or ``delay`` > ``max_delay``;
            nothing was written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"start_or_debounce() needs a @workflow function, got {fn!r}")
    key, value = check_pair(key, value)
    if attributes is not None and key in attributes:
        raise ValueError(f"{key!r} is the debounce key; do not repeat it in attributes")
    wait, longest = span_seconds("delay", delay), span_seconds("max_delay", max_delay)
    if wait > longest:
        raise ValueError(f"delay ({wait} s) must not exceed max_delay ({longest} s)")
    values, unique, limits, windows = split_start_attributes(
        {**(attributes or {}), key: Unique(value)}
    )
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=fn.name,
        args=encode_start(fn, args),
        attributes=values,
        unique=unique,
        limits=limits,
        windows=windows,
        debounce=Debounce(key=key, delay=wait, max_delay=longest),
    )
    target = resolve_world(world)
    await check_plain_write(target)
    result = await target.create_run(request)
    if result.run is not None:
        return Run(result.run.id, world=world, workflow=fn, record=result.run)
    refused = result.conflict
    assert refused is not None
    existing: Run[R] = Run(refused.holder_run_id, world=world, workflow=fn)
    raise AttributeConflictError(
        refused.key, refused.value, existing, limit=refused.limit, pruned=refused.holder_pruned
    )


async def start_or_resume_hook(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    token: str,
    payload: Any = None,
    resume_id: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    delay: float | timedelta | None = None,
    world: World | None = None,
) -> Run[R]:
    """Deliver ``payload`` to hook ``token`` of the open run holding (``key``, ``value``),
    or start that run with the payload waiting for it: Temporal's signal-with-start,
    keyed by any unique pair. Returns the run the payload went to.

    One atomic world operation decides and writes (``worlds._rules.resume``):

    * an open run holds the pair: the payload goes to its hook ``token``;
    * no run holds it, or its holder closed: a run of ``fn`` with ``args`` starts,
      holding the pair (taken over from a closed holder) and the payload;
    * the run has not created hook ``token`` yet: the payload waits in its log
      and the hook it creates with that token receives it, in order; never lost;
    * with ``resume_id``, every call with the same (token, resume_id) delivers
      once in all and answers the same run.

    With ``delay`` (0 seconds to 100 years), a run it starts stays pending that
    long before a worker starts it (as ``start(..., delay=)``); the payload
    waits in its log meanwhile. A delivery to an open run is not delayed.

    Safe under any number of concurrent callers in any number of processes:
    one run holds the pair at a time and each payload is delivered once.

    Raises:
        HookConflictError: another run (not the pair's holder) holds ``token``;
            nothing was written.
        TypeError / ValueError: bad arguments; nothing was written.
    """
    check_token(token)
    if resume_id is not None:
        check_text("resume_id", resume_id)
    request = _keyed_request("start_or_resume_hook", fn, args, key, value, attributes, delay=delay)
    delivery = HookDelivery(
        token=token, payload=encode_result(payload, "the hook payload"), resume_id=resume_id
    )
    target = resolve_world(world)
    await check_plain_write(target)
    result = await target.start_or_resume_hook(request, delivery)
    if result.hook_holder is not None:
        holder: Run[Any] = Run(result.hook_holder, world=world)
        raise HookConflictError(token, holder)
    return Run(result.run_id, world=world, workflow=fn, record=result.run)


async def update_with_start(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    key: str,
    value: AttributeValue,
    name: str,
    payload: Any = None,
    update_id: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    world: World | None = None,
    timeout: float | None = None,
) -> tuple[Run[R], Any]:
    """Send update ``name`` to the open run holding (``key``, ``value``), or start that
    run with the update waiting for it; return the run and the workflow's reply.
    Temporal's update-with-start, keyed by any unique pair (``rfcs/0021-updates.md``).

    One atomic world operation decides and writes (``worlds._rules.updates``):

    * an open run holds the pair: the update goes to it;
    * no run holds it, or its holder closed: a run of ``fn`` with ``args`` starts,
      holding the pair (taken over from a closed holder) with the update first in
      its log, for its ``receive_updates(name)``;
    * with ``update_id``, every call with the same id for the same holder delivers
      once in all and gets the same recorded answer.

    Safe under any number of concurrent callers in any number of processes: one
    run holds the pair at a time, and each update is delivered once.

    Raises:
        UpdateRejectedError: the workflow refused the update.
        UpdateFailedError: the run closed before replying.
        AttributeConflictError: another unique pair in ``attributes`` is held.
        TimeoutError: ``timeout`` seconds passed before the answer (the update stays
            delivered: call again with the same ``update_id``).
        TypeError / ValueError: bad arguments; nothing was written.
    """
    request = _keyed_request("update_with_start", fn, args, key, value, attributes)
    delivery = new_delivery(name, payload, update_id)
    target = resolve_world(world)
    await check_plain_write(target)
    started = await target.update_with_start(request, delivery)
    run = Run(started.run_id, world=world, workflow=fn, record=started.run)
    refused = started.conflict
    if refused is not None:  # a unique pair refused the new run; nothing was written
        raise AttributeConflictError(
            refused.key, refused.value, run, limit=refused.limit, pruned=refused.holder_pruned
        )
    return run, await await_answer(target, started.outcome, delivery, timeout)


def _keyed_request(
    caller: str,
    fn: WorkflowDefinition[..., Any],
    args: tuple[Any, ...],
    key: str,
    value: AttributeValue,
    attributes: Mapping[str, Any] | None,
    *,
    delay: float | timedelta | None = None,
) -> CreateRunRequest:
    """The run a deliver-or-create helper (``caller``) starts when no open run holds
    (``key``, ``value``): holding the pair, taking it over from a closed holder;
    with ``delay``, pending that long before a worker starts it.

    Raises:
        TypeError / ValueError: bad arguments; nothing was written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"{caller}() needs a @workflow function, got {fn!r}")
    key, value = check_pair(key, value)
    values, unique, limits, windows = split_start_attributes(attributes)
    if limits or windows:
        raise ValueError(
            f"{caller}() takes no Limited value or reuse window (yet); "
            "use start() or start_with_policy() for those"
        )
    if key in values and values[key] != value:
        raise ValueError(f"attributes[{key!r}] = {values[key]!r} contradicts value={value!r}")
    values[key] = value
    unique |= {key}
    start_at = None
    if delay is not None:
        start_at = datetime.now(UTC) + timedelta(seconds=span_seconds("delay", delay))
    return CreateRunRequest(
        run_id=new_run_id(),
        workflow=fn.name,
        args=encode_start(fn, args),
        attributes=values,
        unique=unique,
        policy=StartPolicy(key=key, conflict="use_existing", reuse="allow_duplicate"),
        start_at=start_at,
    )
