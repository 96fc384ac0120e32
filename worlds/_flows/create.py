"""Creating a run: ``World.create_run``, for every backend.

In order, in one transaction: a debounced start first meets the pending holder
of its pair (``claims.debounce``: new arguments and a later start for it, or a
takeover); then every unique pair is claimed, in key order: a free one at
once, a held one as the start policy decides (``claims.on_create``: a conflict
undoes everything, a takeover cancels an open holder); then the limited pairs
admit the run, make it wait, or refuse it (``slots.admit``), and the
rate-limited ones give it a token now or later, or refuse it (``rates.admit``); then the run, its
``RunCreated``, its attributes, its slots or places in line, its workflow item
(due at its start time, unless it waits for a slot) and its deadline timer are
written; last, a first task run ahead (``runs.first_task_commit``) is committed
in the same transaction, or the workflow item is leased to ``lease_to``.
"""

from __future__ import annotations

from typing import NoReturn

from worlds._flows import closing, commit, rates, slots, work
from worlds._flows.rows import ClaimRow, IdTaken, Retry, Rollback, Rows
from worlds._flows.tx import Tx
from worlds._rules import claims, requests, runs
from worlds.protocol import work_topic
from worlds.semantics import index_value, workflow_item_id
from worlds.types import (
    ClaimConflict,
    CreateRunRequest,
    CreateRunResult,
    NewWorkItem,
    ReuseWindow,
)

__all__ = ["check", "create_for_pair", "create_run", "refused_before_writes", "run_exists"]


def check(request: CreateRunRequest) -> None:
    """Raise ``ValueError`` if ``request`` contradicts itself (``requests.check_create``);
    a world calls it before its transaction, so bad input writes nothing."""
    requests.check_create(request)


def run_exists(run_id: str) -> NoReturn:
    """Raise the ``ValueError`` of a taken run id (for a world's own shortcut that
    found it taken)."""
    raise requests.run_exists(run_id) from None


def refused_before_writes(request: CreateRunRequest) -> bool:
    """Whether a refusal of ``request`` (a held pair's ``Rollback``) comes before it wrote
    anything, so a batch needs no savepoint to undo it: no debounce, at most one unique
    pair (its claim is taken, or refused, first) and no limited pairs (in the order above)."""
    return request.debounce is None and len(request.unique) <= 1 and not request.limits


async def create_run(rows: Rows, request: CreateRunRequest) -> CreateRunResult:
    """See ``World.create_run``: ``request`` (checked) created in the transaction of ``rows``.

    Raises ``Rollback`` with the conflict when a pair refuses the run, ``Retry``
    when a concurrent debounce took its pair between two reads, and
    ``ValueError`` when the run id is taken.
    """
    return await create_in(Tx(rows), request)


async def create_in(tx: Tx, request: CreateRunRequest) -> CreateRunResult:
    """``create_run`` in transaction ``tx``."""
    rows, run_id, attributes = tx.rows, request.run_id, dict(request.attributes)
    task = runs.first_task_commit(request)
    if request.first is not None and task is not None:
        rows.now = request.first.at  # the run and its first task share the task's time
    debounced = None
    if request.debounce is not None:
        found = await _debounce(tx, request)
        if isinstance(found, CreateRunResult):
            return found
        debounced = found
    superseded = None
    for key in sorted(request.unique):
        value, pair = attributes[key], (key, index_value(attributes[key]))
        claim = ClaimRow(pair, value, run_id, None, None, request.windows.get(key, ReuseWindow()))
        if await rows.claim_if_free(claim) is not None:
            continue
        held = await rows.get_claim(pair)
        assert held is not None and held.run_id is not None, "claim_if_free takes free pairs"
        debouncing = request.debounce is not None and key == request.debounce.key
        if debouncing and debounced is not None:
            generation = debounced.generation  # the holder keeps running
        elif claims.is_free(held, tx.rows.now):
            generation = claims.next_generation(held)
        elif debouncing:
            raise Retry  # free when the debounce looked, held now: a concurrent start took it
        else:
            generation, superseded_now = await _take_over(tx, request, key, held)
            superseded = superseded_now or superseded
        await rows.put_claim(claim, generation)
    admitted = await slots.admit(tx, request)
    if isinstance(admitted, ClaimConflict):
        raise Rollback(CreateRunResult(conflict=admitted))
    token_at = await rates.admit(tx, request)
    if isinstance(token_at, ClaimConflict):
        raise Rollback(CreateRunResult(conflict=token_at))
    eager = admitted == "hold" and runs.runs_ahead(request)
    wake_at = None
    if admitted == "hold" and task is None and not eager:
        wake_at = token_at or request.start_at or tx.rows.now
        if request.debounce is not None:
            wake_at = claims.first_start(request.debounce, tx.rows.now)
    run = runs.new_run(run_id, request.workflow, attributes, tx.rows.now, token_at)
    limits = {key: limit.limit for key, limit in request.limits.items()}
    start_at = request.start_at
    if request.debounce is not None:
        start_at = claims.first_start(request.debounce, tx.rows.now)
    if token_at is not None and token_at > tx.rows.now:
        start_at = token_at  # the run waits for its token: it starts then
    created = runs.created_event(
        request.workflow,
        request.args,
        attributes,
        tx.rows.now,
        limits,
        start_at=start_at,
        debounced=request.debounce is not None,
        priority=request.priority,
        rate_limited=tuple(sorted(request.rates)),
        rates={key: (rate.limit, rate.per) for key, rate in request.rates.items()},
    )
    try:
        # a first task saves the run: the row may be written once, in that state
        await rows.insert_run(run, created, wake_at=wake_at, saved_next=task is not None)
        await slots.take(tx, request, holding=admitted == "hold")
        if token_at is not None:
            await rates.take(tx, request, token_at)
        deadline = runs.deadline_item(request)
        if deadline is not None:
            run, _ = await work.enqueue(tx, run, deadline)
        if task is not None:
            first = await commit.commit_in(tx, task, known=run)  # as just stored: not read again
            return CreateRunResult(run=run, superseded_run_id=superseded, first=first)
    except IdTaken:
        raise requests.run_exists(run_id) from None
    leased = None
    if eager:
        assert request.lease_to is not None
        wake = NewWorkItem(kind="workflow", lease=True)
        run, leased = await work.enqueue(tx, run, wake, request.lease_to, request.lease_seconds)
    return CreateRunResult(run=run, superseded_run_id=superseded, leased=leased)


async def create_for_pair(tx: Tx, request: CreateRunRequest, key: str) -> CreateRunResult:
    """``create_in`` for an operation that delivers to the open holder of the pair of
    ``key`` or creates it (``start_or_resume_hook``, ``update_with_start``), which
    looked for an open holder first.

    Raises ``Retry`` when a concurrent caller created an open holder after it looked,
    and ``Rollback`` with the ``CreateRunResult`` of any other refusal (a closed
    holder that may not be taken over, another pair held): the caller answers it.
    """
    try:
        return await create_in(tx, request)
    except Rollback as refused:
        assert isinstance(refused.result, CreateRunResult) and refused.result.conflict
        conflict = refused.result.conflict
        status = conflict.holder_status
        if conflict.key == key and status is not None and not status.is_closed:
            raise Retry from None  # a concurrent caller created the holder after we looked
        raise


async def _take_over(
    tx: Tx, request: CreateRunRequest, key: str, held: claims.HeldClaim
) -> tuple[int, str | None]:
    """The new run meets ``key``'s pair ``held`` by another run: the generation it takes
    the pair at and the run it superseded, or ``Rollback`` with the conflict."""
    assert held.run_id is not None
    policy, value = request.policy, request.attributes[key]
    pruned = held.pruned_status is not None
    status, holder = held.pruned_status, None
    if not pruned:
        lock = policy is not None and policy.key == key  # it may be cancelled
        holder = await tx.rows.get_run(held.run_id, lock=lock)
        status = None if holder is None else holder.status
    pair = (held.run_id, held.generation)
    taken = claims.on_create(policy, key, value, pair, status, request.run_id, pruned)
    if isinstance(taken, ClaimConflict):
        raise Rollback(CreateRunResult(conflict=taken))
    if taken.cancel_reason is None or holder is None:
        return taken.generation, None
    await closing.cancel(tx, holder, taken.cancel_reason)
    return taken.generation, holder.id


async def _debounce(tx: Tx, request: CreateRunRequest) -> CreateRunResult | claims.Takeover | None:
    """A debounced start meets its pair (locked): the pending holder updated (the
    result), a takeover for the new run, or ``None`` (the pair is free)."""
    debounce, rows = request.debounce, tx.rows
    assert debounce is not None
    pair = (debounce.key, index_value(request.attributes[debounce.key]))
    held = await rows.get_claim(pair, lock=True)
    if held is None or claims.is_free(held, tx.rows.now):
        return None
    record, item = None, None
    if held.pruned_status is None and held.run_id is not None:
        record = await rows.get_run(held.run_id)
        if record is not None:
            item = await rows.get_work(record.id, workflow_item_id(record.id))
    untouched = (
        record is not None and record.last_seq == 1 and (item is None or not item.ever_leased)
    )
    decided = claims.debounce(
        debounce,
        tx.rows.now,
        None if record is None else record.status,
        None if record is None else record.created_at,
        untouched,
        held,
    )
    if isinstance(decided, claims.Takeover):
        return decided
    assert record is not None
    limits = {key: limit.limit for key, limit in request.limits.items()}
    created = runs.created_event(
        record.workflow,
        request.args,
        record.attributes,
        record.created_at,
        limits,
        start_at=decided.start_at,
        debounced=True,
    )
    await rows.rewrite_created(record.id, created)
    if item is not None:
        await rows.set_available(record.id, workflow_item_id(record.id), decided.start_at)
        rows.signal(work_topic(record.workflow))
    return CreateRunResult(run=record, debounced=True)
