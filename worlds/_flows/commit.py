"""Committing: ``World.commit`` and ``commit_many``, for every backend.

A commit to a closed run is refused (its late ``discard`` recorded); one whose
lease is lost is refused naming the holder (a zombie's late step result
recorded as ``StepDiscarded`` unless the log already settles that attempt); a
conditional one whose horizon the log has passed is ``stale``. Otherwise
``commits.commit_flow`` says what the commit does, step by step, and this
module does each step in the rows: settle claims and hook tokens, take and give
back ``hold()`` slots, start the next run of a continue-as-new, append stream
chunks, ack the leased item, enqueue work. The run is then stored, with what
closing it does (``closing.save``); a commit answering an update wakes its callers.

A batch (``commit_each``) is one transaction, each request in a savepoint: a
request that raises leaves no trace and its exception is its outcome.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import assert_never

from worlds._flows import closing, rates, settle, slots, work
from worlds._flows.rows import HeldLease, IdTaken, Rows
from worlds._flows.tx import Tx
from worlds._rules import batches, commits, failures, requests, runs, updates
from worlds.protocol import run_topic, work_topic
from worlds.semantics import CLOSING_EVENTS, carried_payloads, settled
from worlds.types import (
    AttributeSet,
    CommitRequest,
    CommitResult,
    RunContinued,
    RunRecord,
    StreamClosed,
)

__all__ = [
    "Outcome",
    "check_batch",
    "commit",
    "commit_each",
    "commit_in",
    "is_world_failure",
    "one_by_one",
]

Outcome = batches.Outcome
"""One request's outcome in a batch: its result, or the exception it raised."""


def is_world_failure(exc: Exception) -> bool:
    """Whether ``exc`` is the world failing, not the request: it fails a whole batch."""
    return batches.is_world_failure(exc)


async def one_by_one(
    batch: Sequence[CommitRequest], commit: Callable[[CommitRequest], Awaitable[CommitResult]]
) -> list[Outcome]:
    """Each request committed alone by ``commit``, in order, its exception its outcome
    (a world failure is raised): for a batch a world does not put in one transaction."""
    return await batches.one_by_one(batch, commit)


def check_batch(requests: Sequence[CommitRequest]) -> list[CommitRequest]:
    """The batch of ``commit_many`` as a list; ``TypeError`` for an entry that is not a
    ``CommitRequest`` (nothing written)."""
    return batches.check_batch(requests)


async def commit(rows: Rows, request: CommitRequest) -> CommitResult:
    """See ``World.commit``: ``request`` applied in the transaction of ``rows``."""
    return await commit_in(Tx(rows), request)


async def commit_each(rows: Rows, batch: Sequence[CommitRequest]) -> list[Outcome]:
    """See ``World.commit_many``: each request in a savepoint of its own; a request
    that raises is undone and its exception is its outcome, unless the exception
    fails the whole transaction (a world failure, ``Rows.fails_transaction``).

    The requests are applied in the order of their run ids (those of one run in
    the order given), so every batch locks runs in one order: two batches over
    the same runs wait for each other instead of deadlocking."""
    outcomes: list[Outcome | None] = [None] * len(batch)
    for n in sorted(range(len(batch)), key=lambda n: batch[n].run_id):
        savepoint = await rows.savepoint()
        try:
            outcome: Outcome = await commit(rows, batch[n])
        except Exception as exc:
            if batches.is_world_failure(exc) or rows.fails_transaction(exc):
                raise
            await rows.rollback_to(savepoint)
            outcomes[n] = exc
            continue
        await rows.release(savepoint)
        outcomes[n] = outcome
    return [outcome for outcome in outcomes if outcome is not None]


async def commit_in(tx: Tx, request: CommitRequest, known: RunRecord | None = None) -> CommitResult:
    """``request`` applied in transaction ``tx``.

    ``known``: the run as this transaction just stored it (a new run's first
    task), for a request without a lease: the run is not read again.
    """
    rows, lease = tx.rows, request.lease
    if known is not None and lease is None and known.id == request.run_id:
        found: tuple[RunRecord, HeldLease | None] | None = (known, None)
    else:
        closes = any(isinstance(event, CLOSING_EVENTS) for event in request.events)
        after = None if request.expect_seq is None else request.expect_seq - 1
        found = await rows.commit_target(
            request.run_id, lease, request.worker_id, closing=closes, events_after=after
        )
    if found is None:
        raise LookupError(f"unknown run {request.run_id}")
    run, held = found
    if run.status.is_closed:
        if request.discard is None:
            return commits.closed(run.status)
        run, stored = tx.stamp(run, request.discard)
        await closing.save(tx, run)
        return commits.closed(run.status, stored)
    if lease is not None and (held is None or lease.run_id != run.id):
        holder = await rows.lease_holder(lease)
        discard = request.discard
        if discard is None or settled(await rows.events(run.id), discard.step, discard.attempt):
            return commits.lost(run.status, holder)
        run, stored = tx.stamp(run, discard)
        await closing.save(tx, run)
        return commits.lost(run.status, holder, stored)
    if request.expect_seq is not None:
        later = await rows.events(run.id, request.expect_seq - 1)
        if commits.stale(request, later):
            return commits.stale_result(run.status)
    item = None if held is None else (held.kind, held.rewake)
    flow = commits.commit_flow(run, request, tx.rows.now, item)
    reply: object = None
    while True:
        try:
            need = flow.send(reply)
        except StopIteration as stop:
            done: commits.Committed = stop.value
            break
        reply = await _do(tx, request, need)
    if done.attributes:
        await rows.index_attributes(run.id, done.attributes)
    await closing.save(tx, done.run)
    if updates.answers(request.events):  # callers of Run.update wait on the run's topic
        rows.signal(run_topic(run.id))
    return done.result


async def _do(tx: Tx, request: CommitRequest, need: commits.Need) -> object:
    """One step ``commit_flow`` asks for, done; the reply it gets."""
    rows = tx.rows
    match need:
        case commits.Settle(run_id=run_id, event=event):
            if isinstance(event, AttributeSet):
                return await settle.settle_claim(tx, run_id, event)
            return await settle.settle_hook(tx, run_id, event)
        case commits.Acquire(run_id=run_id, event=requested):
            return await slots.acquire(tx, run_id, requested)
        case commits.TakeToken(run_id=run_id, event=asked):
            return await rates.acquire(tx, run_id, asked)
        case commits.Append(run=run, event=event):
            tx.append(run.id, event)
        case commits.Release(run_id=run_id, hold=hold):
            await slots.release_hold(tx, run_id, hold)
        case commits.Continue(run=run, event=continued):
            await _continue(tx, run, continued)
        case commits.Stream(run_id=run_id, event=written):
            if isinstance(written, StreamClosed):
                await rows.close_stream(run_id, written.name)
            else:
                await rows.append_stream(run_id, written.name, [written.data])
            rows.signal(run_topic(run_id))
        case commits.StartHandler(run_id=run_id, handler=handler):
            new, created = failures.handler_run(run_id, handler, rows.now)
            if await rows.get_run(new.id, lock=False) is None:
                await rows.insert_run(new, created, wake_at=rows.now)
        case commits.Ack(action=action):
            assert request.lease is not None
            if action == "rewake":
                await rows.rewake_item(request.run_id, request.lease.id)
                rows.signal(work_topic(request.lease.name))
            else:
                await rows.delete_item(request.run_id, request.lease.id)
        case commits.Enqueue(run=run, new=new):
            return await work.enqueue(tx, run, new, request.worker_id, request.lease_seconds)
        case _:
            assert_never(need)
    return None


async def _continue(tx: Tx, old: RunRecord, event: RunContinued) -> None:
    """Start ``event.next_run_id`` as ``old``'s successor: its run and workflow item,
    ``old``'s run-level claims and start-time slots (its ``hold()`` blocks end),
    and ``old``'s hook tokens, unbound, with their unread payloads."""
    rows, run_id = tx.rows, event.next_run_id
    new = runs.new_run(run_id, old.workflow, old.attributes, tx.rows.now)
    created = runs.created_event(
        old.workflow, event.args, old.attributes, tx.rows.now, event.limits
    )
    try:
        await rows.insert_run(new, created, wake_at=tx.rows.now)
    except IdTaken:
        raise requests.successor_exists(run_id) from None
    await rows.carry_claims(old.id, run_id)
    await slots.promote(tx, await rows.drop_holds(old.id))
    await rows.carry_slots(old.id, run_id)
    hooks = await rows.run_hooks(old.id)
    if hooks:
        carried = carried_payloads(await rows.hook_payloads(old.id), hooks, event)
        for received in carried:
            new, _ = tx.stamp(new, received)
        if carried:
            await rows.save_run(new)
        await rows.carry_hooks(old.id, run_id)
