"""Failure handlers (``@workflow(on_failure=...)``): what a run's ``RunFailed`` carries.

The engine names the handler and encodes its arguments, the failed run's id and
a small description of the error; the world starts the handler's run in the
transaction that stores the failure (``worlds._rules.failures``), so it starts
exactly once per failed run. A handler run's own failure names no handler.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from workflow._codec import encode_start
from workflow.decorators import WorkflowDefinition
from worlds.protocol import World
from worlds.semantics import ON_FAILURE_OF_KEY
from worlds.types import (
    AttributeValue,
    CommitRequest,
    ErrorInfo,
    FailureHandler,
    RunFailed,
)

__all__ = ["describe_error", "failed", "is_handler_run", "with_handler"]

log = logging.getLogger("workflow.worker")


def describe_error(workflow: str, error: ErrorInfo) -> dict[str, str]:
    """The ``error`` argument a failure handler gets: the exception's class name and
    message and the failed workflow's name, all text (any codec can carry it)."""
    return {"type": error.type, "message": error.message, "workflow": workflow}


def is_handler_run(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a run with these start attributes is a failure handler's run."""
    return ON_FAILURE_OF_KEY in attributes


def failed(
    definition: WorkflowDefinition[..., Any] | None,
    run_id: str,
    error: ErrorInfo,
    handler_run: bool,
) -> RunFailed:
    """The ``RunFailed`` of run ``run_id`` of ``definition``: with its handler to start,
    unless it has none or is itself a handler's run (``handler_run``)."""
    handler = None if definition is None or handler_run else definition.on_failure
    if definition is None or handler is None:
        return RunFailed(error=error)
    try:
        args = encode_start(handler, (run_id, describe_error(definition.name, error)))
    except TypeError as exc:  # the handler's annotations refuse (run_id, error)
        log.warning("run %s failed; its on_failure handler cannot take it: %s", run_id, exc)
        return RunFailed(error=error)
    return RunFailed(error=error, handler=FailureHandler(workflow=handler.name, args=args))


async def with_handler(
    request: CommitRequest, definition: WorkflowDefinition[..., Any] | None, world: World
) -> CommitRequest:
    """``request`` (one the worker made to fail a run: a deadline, a poisoned task)
    with its ``RunFailed`` naming the workflow's handler, if it has one."""
    if definition is None or definition.on_failure is None:
        return request
    events = list(request.events)
    for index, event in enumerate(events):
        if isinstance(event, RunFailed) and event.handler is None:
            run = await world.get_run(request.run_id)
            handler_run = run is None or is_handler_run(run.attributes)
            events[index] = failed(definition, request.run_id, event.error, handler_run)
    return msgspec.structs.replace(request, events=tuple(events))
