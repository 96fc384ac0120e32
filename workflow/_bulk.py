"""The built-in ``$bulk`` workflow: one bulk action over the runs a query matches.

A bulk action (``cancel_runs``, ``retry_runs``, ``prune_runs(query=...)``) is
itself a durable run of this runtime, so one over 100,000 runs survives the
crash of the process running it and never acts on a run twice:

* the body pages through the matching run ids, newest first, ``BATCH`` at a
  time: each page is a step (``$bulk.page``) whose result, the page's ids and
  the cursor after them, is recorded, so a resumed run acts on exactly the
  pages it had listed and carries on from the recorded cursor;
* each page is acted on by a second step (``$bulk.act``) whose result, the
  counts and the first errors, is recorded; one step per page, acting on
  chunks of runs sized and spaced by ``workflow._pacing.Pacer`` (one world
  operation per chunk: ``cancel_listed``, ``reopen_listed``, ``prune_listed``),
  so the world is never held longer than a few milliseconds and other
  workers' commits go between the chunks;
* a step the crash interrupted runs again on the same ids, and each action is
  idempotent on its target: a cancelled or cancelling run is not cancelled
  again, a run whose log records this bulk run's ``RunReopened`` is not
  reopened again, a pruned run is gone. Each target counts the same either
  way (``done``: it is in the state the action asks for; ``failed``: it
  cannot be, with an error saying why), so the counts are exact.

``run_bulk`` starts the run, claiming ``bulk_key`` (a digest of the action and
its options, released when the run closes): the same action started again
while one is open attaches to it, which is how a crashed bulk action is
resumed. It then drives the run with a Worker of this process serving only
``$bulk`` (built through ``workflow._runtime``), so it needs no other worker,
and waits for its result.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from workflow import _runtime
from workflow._lookups import list_runs
from workflow._pacing import Pacer
from workflow._run import Run
from workflow._start import start
from workflow._world_resolution import resolve_world
from workflow.context import get_step_metadata
from workflow.decorators import step, workflow
from workflow.errors import AttributeConflictError
from workflow.types import Unique
from worlds.protocol import World
from worlds.semantics import is_pinned
from worlds.types import RunStatus

__all__ = [
    "BATCH",
    "BULK_WORKFLOW",
    "CANCEL_CHUNK",
    "MAX_ERRORS",
    "PRUNE_CHUNK",
    "BulkFailure",
    "BulkResult",
    "Progress",
    "bulk",
    "run_bulk",
]

BULK_WORKFLOW = "$bulk"
BATCH = 500
"""Run ids listed per page (one ``$bulk.page`` step, then one ``$bulk.act`` step)."""
PRUNE_CHUNK = 100
"""The most runs deleted per ``World.prune_listed`` transaction (paced as cancels)."""
CANCEL_CHUNK = 25
"""The most runs cancelled per ``World.cancel_listed`` transaction (a ``Pacer`` cuts
the chunk so a transaction stays short: ``workflow._pacing``)."""
RETRY_CHUNK = 25
"""The most runs reopened per ``World.reopen_listed`` transaction (paced as cancels)."""
MAX_ERRORS = 100
"""Errors kept in a ``BulkResult`` (the counts stay exact past it)."""
DRIVER_LEASE = 10.0
"""Lease seconds of the in-process worker: a crashed driver's run resumes this soon."""

Progress = Callable[[int], None]
"""Told how many more target runs were handled (done or failed) in this process."""

_watchers: dict[str, Progress] = {}
"""The progress callback of each ``$bulk`` run this process drives, by run id."""


@dataclass(frozen=True, slots=True)
class BulkFailure:
    """Why a bulk action could not act on one run."""

    run_id: str
    message: str


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk action did: ``matched`` runs, ``done`` of them now in the state
    the action asks for, ``failed`` that could not be, and the first ``MAX_ERRORS``
    ``errors`` saying why. ``run_id`` is the ``$bulk`` run that did it."""

    matched: int
    done: int
    failed: int
    errors: list[BulkFailure] = field(default_factory=list)
    run_id: str | None = None


@step(name="$bulk.page", max_retries=20, max_delay=10.0)
async def _page(query: str, cursor: str | None, batch: int) -> dict[str, Any]:
    page = await list_runs(query=query, cursor=cursor, limit=batch)
    return {"ids": [run.id for run in page], "next": page.next_cursor}


@step(name="$bulk.act", max_retries=20, max_delay=10.0)
async def _act(action: str, ids: list[str], order: dict[str, Any]) -> dict[str, Any]:
    bulk_id = get_step_metadata().run_id
    world = resolve_world(None)
    watcher = _watchers.get(bulk_id)
    by = f"{order.get('by')} (bulk run {bulk_id})"

    def act_on(chunk: list[str]) -> Awaitable[list[list[str]]]:
        if action == "prune":
            return _prune(world, chunk, bool(order["release_claims"]))
        if action == "cancel":
            return _cancel(world, chunk, order["reason"], order["grace"])
        return _retry(world, chunk, by)

    most = {"prune": PRUNE_CHUNK, "cancel": CANCEL_CHUNK}.get(action, RETRY_CHUNK)
    pacer = Pacer(most)
    done, errors, first = 0, [], 0
    while first < len(ids):
        chunk = ids[first : first + pacer.size]
        first += len(chunk)
        failures = await pacer.paced(act_on(chunk), len(chunk))
        done += len(chunk) - len(failures)
        errors += failures
        if watcher is not None:
            watcher(len(chunk))
    return {"done": done, "failed": len(errors), "errors": errors[:MAX_ERRORS]}


async def _cancel(
    world: World, chunk: list[str], reason: str | None, grace: float | None
) -> list[list[str]]:
    # a cancelled or cancelling run is left unchanged: never cancelled twice
    statuses = await world.cancel_listed(chunk, reason, grace)
    failures = []
    for run_id in chunk:
        status = statuses.get(run_id)
        if status is None:
            failures.append([run_id, f"run {run_id} was not found (pruned?)"])
        elif status not in (RunStatus.CANCELLED, RunStatus.CANCELLING):
            failures.append([run_id, f"run {run_id} is {status.value}: nothing to cancel"])
    return failures


async def _retry(world: World, chunk: list[str], by: str) -> list[list[str]]:
    # a run whose log records this bulk run's ``RunReopened`` (an interrupted attempt
    # of this step) counts as done, whatever it did since: never reopened twice
    outcomes = await world.reopen_listed(chunk, by)
    failures = []
    for run_id in chunk:
        outcome = outcomes.get(run_id)
        if outcome is None:
            failures.append([run_id, f"run {run_id} was not found (pruned?)"])
        elif outcome.refused is not None:
            failures.append([run_id, outcome.refused])
        elif not outcome.reopened:
            status = outcome.status.value
            failures.append(
                [run_id, f"run {run_id} is {status}: only a failed or cancelled run is retried"]
            )
    return failures


async def _prune(world: World, chunk: list[str], release_claims: bool) -> list[list[str]]:
    pruned = set(await world.prune_listed(chunk, release_claims=release_claims))
    failures = []
    for run_id in chunk:
        if run_id in pruned:
            continue
        record = await world.get_run(run_id)
        if record is None:
            continue  # gone already: pruned by an interrupted attempt, or by another prune
        if not record.status.is_closed:
            failures.append([run_id, f"run {run_id} is {record.status.value}: it is open"])
        elif is_pinned(record):
            failures.append([run_id, f"run {run_id} is pinned: unpin it first"])
        else:
            failures.append([run_id, f"run {run_id} was not pruned (busy): prune it again"])
    return failures


@workflow(name=BULK_WORKFLOW)
async def bulk(order: dict[str, Any]) -> dict[str, Any]:
    """Act (``order["action"]``: cancel, retry or prune) on every run ``order["query"]``
    matches, a recorded page at a time; returns the counts and the first errors."""
    matched = done = failed = 0
    errors: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await _page(order["query"], cursor, order["batch"])
        ids: list[str] = page["ids"]
        matched += len(ids)
        if ids:
            outcome = await _act(order["action"], ids, order)
            done += outcome["done"]
            failed += outcome["failed"]
            errors += outcome["errors"][: MAX_ERRORS - len(errors)]
        cursor = page["next"]
        if cursor is None:
            return {"matched": matched, "done": done, "failed": failed, "errors": errors}


def _short(text: str, limit: int = 256) -> str:
    """``text`` cut to an attribute value's ``limit`` UTF-8 bytes."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", errors="ignore") + "..."


async def run_bulk(
    order: dict[str, Any], *, world: World | None, on_progress: Progress | None
) -> BulkResult:
    """Start (or attach to: the same order is open) the ``$bulk`` run of ``order``,
    drive it with an in-process worker and return what it did."""
    target = resolve_world(world)
    order = {**order, "batch": BATCH}
    # ``by`` names the caller, not the action: the same action from another user attaches too
    key = json.dumps({k: v for k, v in order.items() if k != "by"}, sort_keys=True, default=str)
    attributes: dict[str, Any] = {
        "bulk_action": order["action"],
        "bulk_query": _short(order["query"]),
        "bulk_key": Unique(
            hashlib.sha256(key.encode()).hexdigest()[:32],
            release_on={"completed", "failed", "cancelled"},
        ),
    }
    async with _runtime.in_process_worker(target, [bulk], lease_seconds=DRIVER_LEASE):
        try:
            run: Run[Any] = await start(bulk, order, attributes=attributes, world=target)
        except AttributeConflictError as conflict:
            # the same action, interrupted: resume it
            run = Run(conflict.existing_run.id, world=target)
        if on_progress is not None:
            _watchers[run.id] = on_progress
        try:
            outcome = await run.result()
        finally:
            _watchers.pop(run.id, None)
    return BulkResult(
        matched=outcome["matched"],
        done=outcome["done"],
        failed=outcome["failed"],
        errors=[BulkFailure(run_id, message) for run_id, message in outcome["errors"]],
        run_id=run.id,
    )
