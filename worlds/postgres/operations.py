"""What the PostgreSQL world's run operations do inside their one transaction.

The general path of ``create_run`` (claims by the start policy, debounce, the
limited pairs' slots, then the run: what ``PostgresWorld.create_run`` does when
its one-statement paths do not apply), resuming hooks, ``start_or_resume_hook``,
reopening and forking runs. Each is a function of the transaction ``Tx``;
``PostgresWorld`` runs it through ``_write`` (one transaction, retried on races).
"""

from __future__ import annotations

import msgspec

from worlds._rules import claims, reopen, resume, runs
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.postgres.connection import RollbackError
from worlds.postgres.transactions import Tx
from worlds.semantics import index_value
from worlds.types import (
    ClaimConflict,
    CreateRunRequest,
    CreateRunResult,
    HookDelivery,
    HookReceived,
    HookStartResult,
    NewWorkItem,
    ReuseWindow,
    RunRecord,
)

__all__ = [
    "RACED",
    "create_in",
    "fork_in",
    "reopen_in",
    "resume_in",
    "start_or_deliver_in",
]

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


async def resume_in(tx: Tx, token: str, payload: bytes, resume_id: str | None) -> str | None:
    """``World.resume_hook`` in transaction ``tx``: the run resumed, ``None`` if no run holds
    ``token``."""
    if resume_id is not None:
        answered = await tx.conn.fetchval(sql.RESUMED, token, resume_id)
        if answered is not None:
            return str(answered)
    while True:
        seen = await tx.conn.fetchrow(sql.HOOK_HOLDER, token)
        if seen is None:
            return None
        # Hooks are created and disposed of under their run's lock: once
        # it is held, a hook still there stays until this commit.
        found = await tx.lock_run(seen["run_id"])
        hook = await tx.conn.fetchrow(sql.HOOK_HOLDER, token)
        if found is not None and hook is not None and hook["run_id"] == seen["run_id"]:
            break
    run, attributes = found
    if resume_id is not None and (
        await tx.conn.fetchval(sql.RECORD_RESUME, token, resume_id, run.id) is None
    ):
        # a concurrent delivery with this resume id committed first
        return str(await tx.conn.fetchval(sql.RESUMED, token, resume_id))
    number = hook["hook"]
    received = HookReceived(
        hook=number, payload=payload, resume_id=resume_id, token="" if number else token
    )
    run, _ = tx.stamp(run, received)
    run, _ = await tx.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
    await tx.save_run(run, attributes)
    return run.id


async def start_or_deliver_in(
    tx: Tx, request: CreateRunRequest, delivery: HookDelivery, key: str, ivalue: str
) -> HookStartResult | None:
    """``World.start_or_resume_hook`` in transaction ``tx`` (its checks done): deliver to the
    holder of ``key``, or create the run and deliver to it; ``None`` when a concurrent
    caller took the token first (roll back, try again)."""
    if delivery.resume_id is not None:
        seen = await tx.conn.fetchval(sql.RESUMED, delivery.token, delivery.resume_id)
        if seen is not None:
            return HookStartResult(run_id=str(seen))
    held = await tx.conn.fetchrow(sql.LOCK_CLAIM, key, ivalue)
    if held is not None and held["run_id"] is not None:
        found = await tx.lock_run(held["run_id"])
        status = None if found is None else found[0].status
        if resume.route(status) == "deliver":
            return await tx.deliver(held["run_id"], delivery)
    hook = await tx.conn.fetchrow(sql.HOOK_HOLDER, delivery.token)
    if hook is not None:  # another run holds the token: create nothing
        return HookStartResult(run_id=hook["run_id"], hook_holder=hook["run_id"])
    created = await create_in(tx, request)
    delivered = await tx.deliver(request.run_id, delivery)
    if delivered.hook_holder is not None:
        return None  # a concurrent caller took the token: roll back, try again
    return msgspec.structs.replace(delivered, created=True, run=created.run)


async def reopen_in(tx: Tx, run_id: str, by: str) -> RunRecord | None:
    """``World.reopen_run`` in transaction ``tx``."""
    found = await tx.lock_run(run_id)
    if found is None:
        return None
    run, attributes = found
    rows = await tx.conn.fetch(sql.READ_EVENTS, run_id, 0)
    events = [codecs.decode_event(r["data"], r["seq"], r["at"]) for r in rows]
    plan = reopen.plan_reopen(run, events, by)
    if plan.event is None:
        return run
    run, _ = tx.stamp(run, plan.event)
    for new in plan.work:
        run, _ = await tx.enqueue(run, new, "", 0.0)
    await tx.save_run(run, attributes)
    return run


async def fork_in(
    tx: Tx, source_run_id: str, run_id: str, from_step: int, by: str
) -> RunRecord | None:
    """``World.fork_run`` in transaction ``tx``."""
    row = await tx.conn.fetchrow(sql.GET_RUN, source_run_id)
    if row is None:
        return None
    source = codecs.run_from_row(row)
    rows = await tx.conn.fetch(sql.READ_EVENTS, source_run_id, 0)
    events = [codecs.decode_event(r["data"], r["seq"], r["at"]) for r in rows]
    plan = reopen.plan_fork(source, events, from_step, by)
    await tx.insert_run(run_id, source.workflow, plan.args, plan.attributes)
    run = runs.new_run(run_id, source.workflow, plan.attributes, tx.now)
    for event in plan.events:
        run, _ = tx.stamp(run, event)
    for new in plan.work:
        run, _ = await tx.enqueue(run, new, "", 0.0)
    keys = list(run.attributes)
    ivalues = [index_value(run.attributes[key]) for key in keys]
    await tx.conn.execute(sql.UPSERT_ATTRIBUTES, run_id, keys, ivalues)
    await tx.save_run(run, codecs.encode(run.attributes))
    return run
