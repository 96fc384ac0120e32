"""The general path of ``create_run`` on the PostgreSQL world, in one transaction.

Claims by the start policy, debounce, the limited pairs' slots, then the run:
what ``PostgresWorld.create_run`` does when its one-statement paths do not
apply, and what ``start_or_resume_hook`` does when it creates the run.
"""

from __future__ import annotations

from worlds._rules import claims, runs
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.postgres.connection import RollbackError
from worlds.postgres.transactions import Tx
from worlds.semantics import index_value
from worlds.types import ClaimConflict, CreateRunRequest, CreateRunResult, ReuseWindow

__all__ = ["RACED", "create_in"]

RACED = CreateRunResult()
"""A debounced start found its pair free, then taken: run the transaction again."""


async def create_in(tx: Tx, request: CreateRunRequest) -> CreateRunResult:
    """The transaction of ``create_run`` (its checks done) on the general path: claims
    (by the start policy), debounce, limited pairs' slots, then the run."""
    attributes = dict(request.attributes)
    policy = request.policy
    run_id = request.run_id
    superseded = None
    debounced = None if request.debounce is None else await tx.debounce(request)
    if isinstance(debounced, CreateRunResult):
        return debounced
    for key in sorted(request.unique):
        value = attributes[key]
        window = request.windows.get(key, ReuseWindow())
        reuse = (window.ttl, claims.encode_release_on(window.release_on))
        if await tx.claim_if_free(run_id, key, value, None, None, *reuse) is not None:
            continue
        row = await tx.conn.fetchrow(sql.GET_CLAIM, key, index_value(value))
        assert row is not None, "a pair claim_if_free found taken stays (it is locked)"
        held = codecs.held_from_row(row)
        holder_id = held.run_id
        assert holder_id is not None  # claim_if_free takes released pairs
        debouncing = request.debounce is not None and key == request.debounce.key
        if debouncing and debounced is None:
            raise RollbackError(RACED)  # a concurrent debounce claimed it first
        if debouncing and debounced is not None:
            generation = debounced.generation  # the holder keeps running
        elif claims.is_free(held, tx.now):
            generation = claims.next_generation(held)
        else:
            pruned = held.pruned_status is not None
            status = held.pruned_status
            if not pruned:
                lock = policy is not None and policy.key == key
                holder = await tx.conn.fetchrow(sql.LOCK_RUN if lock else sql.GET_RUN, holder_id)
                status = None if holder is None else codecs.run_from_row(holder).status
            pair = (holder_id, held.generation)
            taken = claims.on_create(policy, key, value, pair, status, run_id, pruned)
            if isinstance(taken, ClaimConflict):
                raise RollbackError(CreateRunResult(conflict=taken))
            if taken.cancel_reason is not None:
                tx.tick()
                await tx.cancel(holder_id, taken.cancel_reason)
                superseded = holder_id
            generation = taken.generation
        params = (key, index_value(value), codecs.encode(value), run_id, generation)
        await tx.conn.execute(sql.PUT_CLAIM, *params, None, None, *reuse)
    admitted = await tx.admit(request) if request.limits else "hold"
    if isinstance(admitted, ClaimConflict):
        raise RollbackError(CreateRunResult(conflict=admitted))
    wake = admitted == "hold"
    start_at = request.start_at
    if request.debounce is not None:
        start_at = claims.first_start(request.debounce, tx.now)
    await tx.insert_run(
        run_id,
        request.workflow,
        request.args,
        attributes,
        wake=wake,
        start_at=start_at,
    )
    if request.limits:
        await tx.take_slots(request, holding=wake)
    run = runs.new_run(run_id, request.workflow, attributes, tx.now)
    deadline = runs.deadline_item(request)
    if deadline is not None:
        run, _ = await tx.enqueue(run, deadline, "", 0.0)
    return CreateRunResult(run=run, superseded_run_id=superseded)
