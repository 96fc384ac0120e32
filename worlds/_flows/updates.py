"""Updates from outside: ``World.send_update``, ``update_outcome`` and
``update_with_start``, for every backend.

An update id the run accepted before writes nothing and answers that update's
outcome. A closed or unknown run refuses (``failed``). Otherwise the run's row
is locked, the id recorded (with the sequence number its ``UpdateReceived``
takes, so reading the answer reads the log from there on), the event appended
and the workflow woken, per ``worlds._rules.updates``. ``update_with_start``
sends the update to the open run holding the request's pair, or creates that
run (``create.create_in``: the create flow's claim check, in the same
transaction) with the update waiting in its log.
"""

from __future__ import annotations

from worlds._flows import closing, create, work
from worlds._flows.rows import Rollback, Rows
from worlds._flows.tx import Tx
from worlds._rules import requests, updates
from worlds.semantics import index_value
from worlds.types import (
    CreateRunRequest,
    CreateRunResult,
    RunRecord,
    UpdateDelivery,
    UpdateOutcome,
    UpdateStartResult,
)

__all__ = [
    "check_delivery",
    "check_update_with_start",
    "send_update",
    "update_outcome",
    "update_with_start",
]


def check_delivery(delivery: UpdateDelivery) -> None:
    """Raise ``ValueError`` for an update no world can take, before any transaction."""
    updates.check_delivery(delivery)


def check_update_with_start(request: CreateRunRequest, delivery: UpdateDelivery) -> None:
    """Raise ``ValueError`` for a request ``update_with_start`` cannot take (it needs a
    policy naming its unique key; ``create.check``), before any transaction."""
    updates.check_delivery(delivery)
    updates.check_request(request)
    requests.check_create(request)


async def send_update(rows: Rows, run_id: str, delivery: UpdateDelivery) -> UpdateOutcome:
    """See ``World.send_update``: ``pending`` once delivered, or the known outcome."""
    # The run first, locked, then whether it saw the id: a delivery of the same id
    # (which locks the run too) has then committed before this look or waits for
    # this transaction. Read the other way round, under PostgreSQL's read committed
    # a concurrent delivery, its reply and the run's close could all commit between
    # the two reads: the id looked new, the run closed, and an update the run had
    # answered was refused.
    run = await rows.get_run(run_id)
    seen = await rows.update_seq(run_id, delivery.update_id)
    if seen is not None:
        return await _read(rows, run_id, delivery.update_id, seen)
    outcome, _ = await _deliver(Tx(rows), run_id, run, delivery)
    return outcome


async def update_outcome(rows: Rows, run_id: str, update_id: str) -> UpdateOutcome | None:
    """See ``World.update_outcome``: ``None`` when run ``run_id`` never accepted the id."""
    seen = await rows.update_seq(run_id, update_id)
    if seen is None:
        return None
    return await _read(rows, run_id, update_id, seen)


async def update_with_start(
    rows: Rows, request: CreateRunRequest, delivery: UpdateDelivery
) -> UpdateStartResult:
    """See ``World.update_with_start`` (checked by ``check_update_with_start``).

    Raises ``Rollback`` with the answer when the pair's closed holder may not be
    taken over, and ``Retry`` when a concurrent caller created the holder after
    this one looked.
    """
    tx = Tx(rows)
    key = updates.check_request(request)
    held = await rows.get_claim((key, index_value(request.attributes[key])), lock=True)
    if held is not None and held.run_id is not None:
        holder = await rows.get_run(held.run_id)
        if holder is not None:
            seen = await rows.update_seq(holder.id, delivery.update_id)
            route = updates.accept(holder.status, seen is not None)
            if seen is not None:
                outcome = await _read(rows, holder.id, delivery.update_id, seen)
                return UpdateStartResult(run_id=holder.id, outcome=outcome)
            if route == "deliver":
                outcome, _ = await _deliver(tx, holder.id, holder, delivery)
                return UpdateStartResult(run_id=holder.id, outcome=outcome)
    try:
        created = await create.create_for_pair(tx, request, key)
    except Rollback as refused:
        assert isinstance(refused.result, CreateRunResult) and refused.result.conflict
        conflict = refused.result.conflict
        holder_id = conflict.holder_run_id
        answer = updates.refused(holder_id, await rows.get_run(holder_id, lock=False))
        refusal = UpdateStartResult(run_id=holder_id, outcome=answer, conflict=conflict)
        raise Rollback(refusal) from None
    assert created.run is not None, "update_with_start takes no debounce"
    outcome, run = await _deliver(tx, created.run.id, created.run, delivery)
    return UpdateStartResult(run_id=created.run.id, outcome=outcome, created=True, run=run)


async def _deliver(
    tx: Tx, run_id: str, run: RunRecord | None, delivery: UpdateDelivery
) -> tuple[UpdateOutcome, RunRecord | None]:
    """Give ``delivery`` to ``run`` (locked), unless it refuses; the outcome and the run."""
    rows = tx.rows
    if run is None or updates.accept(run.status, False) == "refuse":
        return updates.refused(run_id, run), run
    if not await rows.record_update(run.id, delivery.update_id, run.last_seq + 1):
        seen = await rows.update_seq(run.id, delivery.update_id)  # a concurrent caller came first
        assert seen is not None
        return await _read(rows, run.id, delivery.update_id, seen), run
    run, _ = tx.stamp(run, updates.received(delivery))
    run = await work.wake(tx, run)
    await closing.save(tx, run)
    return updates.pending(run.id), run


async def _read(rows: Rows, run_id: str, update_id: str, seq: int) -> UpdateOutcome:
    """The outcome of the update the run accepted as event ``seq``, from its log."""
    run = await rows.get_run(run_id, lock=False)
    if run is None:  # pruned since: the log that held the answer is gone
        return updates.refused(run_id, None)
    return updates.outcome(run, update_id, await rows.events(run_id, seq - 1))
