"""Runs and hooks from outside a workflow: by id, by unique pair, by filter.

``get_run`` makes a handle without I/O; ``find_run`` resolves a unique pair to
its holder; ``list_runs`` pages through a filter; ``release_claims`` frees a
pair a pruned run's tombstone holds (pruning itself is ``workflow._operations``);
``resume_hook`` and ``list_hooks``
reach a run's hooks by token.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from workflow._attributes import check_pair, check_text, check_token
from workflow._codec import encode_result
from workflow._run import Run
from workflow._world_resolution import resolve_world
from workflow.decorators import WorkflowDefinition
from workflow.errors import AttributeConflictError, HookNotFoundError
from workflow.query import parse as parse_query
from worlds.codec import check_plain_write
from worlds.protocol import World
from worlds.query import Expr, RunQuery
from worlds.types import (
    AttributeValue,
    Claim,
    ClaimConflict,
    HookRecord,
    RunStatus,
    WorkerRecord,
)

__all__ = [
    "RunList",
    "find_run",
    "get_run",
    "list_hooks",
    "list_runs",
    "release_claims",
    "resume_hook",
]


def get_run(run_id: str, *, world: World | None = None) -> Run[Any]:
    """A handle to run ``run_id``; no I/O happens until a method is awaited."""
    return Run(run_id, world=world)


async def find_run(
    key: str, value: AttributeValue, *, world: World | None = None
) -> Run[Any] | None:
    """The run holding the unique pair (``key``, ``value``), or ``None``.

    A pair whose reuse window freed it (``Unique(..., ttl=, release_on=)``) has
    no holder. A pruned holder's tombstone still answers with that run's id,
    though the run itself is gone: the handle's ``pruned_status`` says how it
    had closed, and its methods (``status()``, ``result()``, ...) raise
    ``RunNotFoundError`` saying it was pruned and how ``release_claims`` frees
    the pair. A live holder's handle has ``pruned_status`` None.
    """
    key, value = check_pair(key, value)
    claim = await resolve_world(world).find_claim(key, value)
    if claim is None:
        return None
    tombstone = claim if claim.pruned_status is not None else None
    return Run(claim.run_id, world=world, tombstone=tombstone)


async def release_claims(
    key: str, value: AttributeValue, *, world: World | None = None
) -> Claim | None:
    """Free the unique pair (``key``, ``value``) held by a pruned or closed run.

    The way out of a tombstone (a pruned run's claim, which keeps refusing the
    pair): the pair is released, atomically, keeping its generation, so the
    next run to claim it gets a higher one (fencing tokens never go back). The
    claim of a run that has closed, and still holds it, is released the same
    way. Returns the claim as it was (``Claim.pruned_status`` set for a
    tombstone), or ``None`` when nothing held the pair.

    Raises:
        AttributeConflictError: a pending or running run holds the pair; nothing
            was released (cancel the run, or wait for it to close, first).
        ValueError, TypeError: ``key`` or ``value`` is not a valid attribute.
    """
    key, value = check_pair(key, value)
    answer = await resolve_world(world).release_claim(key, value)
    if isinstance(answer, ClaimConflict):
        holder: Run[Any] = Run(answer.holder_run_id, world=world)
        status = answer.holder_status or "open"
        reason = (
            f"it is {status}, and only a closed or pruned run's claim can be released: "
            "cancel the run (or let it close) first"
        )
        raise AttributeConflictError(key, value, holder, reason=reason)
    return answer


@dataclass(frozen=True, slots=True)
class RunList:
    """One page of ``list_runs``: iterate it; pass ``next_cursor`` back for more."""

    runs: list[Run[Any]]
    next_cursor: str | None

    def __iter__(self) -> Iterator[Run[Any]]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)


async def list_runs(
    *,
    workflow: str | WorkflowDefinition[..., Any] | None = None,
    status: RunStatus | str | list[RunStatus | str] | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = 100,
    cursor: str | None = None,
    query: str | Expr | None = None,
    world: World | None = None,
) -> RunList:
    """Runs matching every given filter, newest first, one page at a time.

    ``query`` is a filter in the language of ``workflow.query`` (text, or a tree
    from ``workflow.query.parse``), ANDed with the other filters.

    Raises:
        QuerySyntaxError: ``query`` is malformed (a ``ValueError``).
        NotImplementedError: the world cannot serve ``query``; the message says why.
    """
    where = parse_query(query) if isinstance(query, str) else query
    if isinstance(workflow, WorkflowDefinition):
        workflow = workflow.name
    statuses = None
    if status is not None:
        items = status if isinstance(status, list) else [status]
        statuses = frozenset(RunStatus(s) for s in items)
    checked = dict(check_pair(k, v) for k, v in (attributes or {}).items())
    for name, moment in (("created_after", created_after), ("created_before", created_before)):
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise ValueError(f"{name} must be timezone-aware, got {moment!r}")
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be 1-1000, got {limit}")
    page = await resolve_world(world).list_runs(
        RunQuery(
            workflow=workflow,
            statuses=statuses,
            attributes=checked,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            cursor=cursor,
            where=where,
        )
    )
    runs: list[Run[Any]] = [Run(r.id, world=world, record=r) for r in page.runs]
    return RunList(runs, page.next_cursor)


async def resume_hook(
    token: str, payload: Any = None, *, resume_id: str | None = None, world: World | None = None
) -> Run[Any]:
    """Deliver ``payload`` to the hook ``token`` and return the run that holds it.

    Each call delivers once; calls with the same ``resume_id`` deliver once in
    all (retries of one webhook, say).

    Raises:
        HookNotFoundError: no open run holds ``token``.
        TypeError: ``payload`` cannot be recorded; nothing was delivered.
    """
    check_token(token)
    if resume_id is not None:
        check_text("resume_id", resume_id)
    encoded = encode_result(payload, "the hook payload")
    target = resolve_world(world)
    await check_plain_write(target)
    run_id = await target.resume_hook(token, encoded, resume_id)
    if run_id is None:
        raise HookNotFoundError(token)
    return Run(run_id, world=world)


async def list_hooks(*, run_id: str | None = None, world: World | None = None) -> list[HookRecord]:
    """The live hooks of run ``run_id`` (or of every open run), oldest first."""
    return await resolve_world(world).list_hooks(run_id)


async def list_workers(*, world: World | None = None) -> list[WorkerRecord]:
    """The workers registered in the world, by id, each with its status as the world
    sees it now (``live``, ``silent``, ``dead`` or ``stopped``), its last heartbeat and
    the count of items it reported holding (RFC 0001, "Worker liveness")."""
    return await resolve_world(world).list_workers()
