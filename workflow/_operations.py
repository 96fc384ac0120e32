"""Operations on many runs at once: ``cancel_runs``, ``retry_runs`` and ``prune_runs``.

Each takes runs by query (the language of ``workflow.query``) and acts through
a durable ``$bulk`` run (``workflow._bulk``), returning a ``BulkResult``;
``prune_runs(closed_before=...)`` without a query is the one-transaction prune
of the oldest closed runs it always was.

With no worker serving ``$bulk`` anywhere, these functions need none: each
starts the ``$bulk`` run and drives it with a Worker of this process that runs
only ``$bulk``, until it closes. Interrupted (the process killed), the run
stays open; calling the same function with the same arguments again attaches
to it and carries on from its last recorded page, acting on no run twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import overload

from workflow._attributes import check_text
from workflow._bulk import BulkResult, Progress, run_bulk
from workflow._run import caller
from workflow._world_resolution import resolve_world
from workflow.query import format as format_query
from workflow.query import parse as parse_query
from worlds.protocol import World
from worlds.query import And, Compare, Expr, FieldRef, In, IsNull, Not, Or, StartsWith

__all__ = ["cancel_runs", "prune_runs", "retry_runs"]


def _where(query: str | Expr) -> Expr:
    if isinstance(query, str):
        return parse_query(query)  # QuerySyntaxError (a ValueError) before anything runs
    if not isinstance(query, (Compare, In, StartsWith, IsNull, And, Or, Not)):
        raise TypeError(f"query is text or a workflow.query tree, not {type(query).__name__}")
    return query


async def cancel_runs(
    query: str | Expr,
    reason: str | None = None,
    *,
    grace: float | None = 30.0,
    world: World | None = None,
    on_progress: Progress | None = None,
) -> BulkResult:
    """Cancel every run ``query`` matches, as ``Run.cancel(reason, grace=grace)`` would.

    Runs as a durable ``$bulk`` run (see the module docstring): a batch of run
    ids at a time, each batch a recorded step, one world operation per run.
    ``done`` counts the runs now cancelled or cancelling (including those that
    already were); ``failed`` the runs that had closed otherwise, with an error
    each. ``on_progress(n)`` is told as runs are handled in this process.

    Raises:
        QuerySyntaxError: ``query`` is malformed; nothing was cancelled.
        ValueError: ``grace`` is negative.
    """
    where = _where(query)
    if reason is not None:
        check_text("reason", reason)
    if grace is not None and grace < 0:
        raise ValueError(f"grace must be >= 0 seconds, got {grace}")
    order = {"action": "cancel", "query": format_query(where), "reason": reason, "grace": grace}
    return await run_bulk(order, world=world, on_progress=on_progress)


async def retry_runs(
    query: str | Expr,
    *,
    world: World | None = None,
    on_progress: Progress | None = None,
) -> BulkResult:
    """Reopen every failed or cancelled run ``query`` matches, as ``Run.retry()`` would.

    Runs as a durable ``$bulk`` run; each reopened run's ``RunReopened`` names
    this caller and the ``$bulk`` run, which is how a resumed bulk retry knows
    the runs it reopened already (it never reopens one twice, even one that
    failed again since). ``done`` counts the reopened runs; ``failed`` the
    others (open or completed runs, refused reopens), with an error each.
    After an incident: ``await retry_runs("status = 'failed' AND closed_at >
    '2024-05-01T12:00:00Z'")``.

    Raises:
        QuerySyntaxError: ``query`` is malformed; nothing was reopened.
    """
    where = _where(query)
    order = {"action": "retry", "query": format_query(where), "by": caller()}
    return await run_bulk(order, world=world, on_progress=on_progress)


@overload
async def prune_runs(
    *,
    closed_before: datetime,
    limit: int = 1000,
    release_claims: bool = False,
    query: None = None,
    world: World | None = None,
    on_progress: Progress | None = None,
) -> list[str]: ...
@overload
async def prune_runs(
    *,
    closed_before: datetime | None = None,
    limit: int = 1000,
    release_claims: bool = False,
    query: str | Expr,
    world: World | None = None,
    on_progress: Progress | None = None,
) -> BulkResult: ...


async def prune_runs(
    *,
    closed_before: datetime | None = None,
    limit: int = 1000,
    release_claims: bool = False,
    query: str | Expr | None = None,
    world: World | None = None,
    on_progress: Progress | None = None,
) -> list[str] | BulkResult:
    """Delete closed runs; keep their claims as tombstones.

    Retention is not uniqueness: each pruned run's unique claims stay as
    tombstones (pair, run id, final status, generation), so a later start of
    the pair is still refused, by an ``AttributeConflictError`` saying the
    holder was pruned (policies see the holder's final status). With
    ``release_claims=True`` the pairs are released instead and may be claimed
    again (with a higher generation), and so are the tombstones earlier prunes
    kept (even when this one prunes no run). ``release_claims(key, value)``
    frees one tombstoned pair. Claims whose ``ttl`` lapsed are released either
    way. A pinned run (``Run.pin``) is never pruned.

    Without ``query``: deletes at most ``limit`` runs that closed before
    ``closed_before``, oldest first, in one atomic world operation; returns
    their ids. Call it again to prune more.

    With ``query``: deletes every closed run the query matches (and, given
    ``closed_before``, that closed before it) as a durable ``$bulk`` run, in
    batches of ``workflow._bulk.PRUNE_CHUNK`` runs per transaction, and returns
    a ``BulkResult`` (``failed``: pinned runs; ``limit`` does not apply).

    Raises:
        TypeError: ``closed_before`` is not a ``datetime`` (an ISO string is
            refused rather than guessed at: parse it with
            ``datetime.fromisoformat`` and give it a timezone), or neither it
            nor ``query`` is given.
        ValueError: ``closed_before`` is naive, or ``limit`` < 1.
        QuerySyntaxError: ``query`` is malformed.
    """
    if query is None and closed_before is None:
        raise TypeError("prune_runs needs closed_before=, query=, or both")
    if closed_before is not None:
        if not isinstance(closed_before, datetime):
            raise TypeError(
                f"closed_before is a timezone-aware datetime, not {type(closed_before).__name__}"
                + (
                    " (parse it: datetime.fromisoformat(text), with an offset such as +00:00)"
                    if isinstance(closed_before, str)
                    else ""
                )
            )
        if closed_before.tzinfo is None:
            raise ValueError("closed_before must be timezone-aware")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if not isinstance(release_claims, bool):
        raise TypeError("release_claims is True or False")
    if query is None:
        assert closed_before is not None
        return await resolve_world(world).prune_runs(
            closed_before, limit, release_claims=release_claims
        )
    terms: list[Expr] = [IsNull(FieldRef("closed_at"), negated=True), _where(query)]
    if closed_before is not None:
        terms.insert(1, Compare(FieldRef("closed_at"), "<", closed_before))
    order = {
        "action": "prune",
        "query": format_query(And(tuple(terms))),
        "release_claims": release_claims,
    }
    return await run_bulk(order, world=world, on_progress=on_progress)
