"""What the SQLite world's write operations do inside their one ``Writer`` transaction.

``create_run`` (claims by the start policy, debounce, the limited pairs' slots,
the run and its first task run ahead), ``commit`` (alone or in a batch, a
savepoint each), resuming hooks, ``start_or_resume_hook``, reopening and
forking runs. Each is a function of the transaction; ``SqliteWorld`` runs it
through its connection's ``write``.
"""

from __future__ import annotations

import sqlite3

import msgspec

from worlds._rules import claims, commits, reopen, requests, resume, runs
from worlds.protocol import WORK_TOPIC
from worlds.semantics import index_value, settled, workflow_item_id
from worlds.sqlite import codecs
from worlds.sqlite import statements as sql
from worlds.sqlite.transactions import RollbackError, Writer
from worlds.types import (
    ClaimConflict,
    CommitRequest,
    CommitResult,
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
    "commit_in",
    "create_in",
    "fork_in",
    "reopen_in",
    "resume_in",
    "start_or_deliver_in",
]


def create_in(tx: Writer, request: CreateRunRequest, task: CommitRequest | None) -> CreateRunResult:
    """``create_run``'s transaction (its checks done): claims by the start policy,
    debounce, limited pairs' slots, the run, and its first task run ahead (``task``)."""
    attributes = dict(request.attributes)
    ivalues = {key: index_value(value) for key, value in attributes.items()}
    db, run_id = tx.db, request.run_id
    if request.first is not None and task is not None:
        tx.now, tx.now_us = request.first.at, codecs.to_micros(request.first.at)
    debounced = None if request.debounce is None else tx.debounce(request)
    if isinstance(debounced, CreateRunResult):
        return debounced
    try:
        db.execute(sql.INSERT_RUN, (run_id, request.workflow, tx.now_us, codecs.encode(attributes)))
    except sqlite3.IntegrityError:
        raise requests.run_exists(run_id) from None
    superseded = None
    for key in sorted(request.unique):
        value, claim = attributes[key], (key, ivalues[key])
        encoded = codecs.encode(value)
        window = request.windows.get(key, ReuseWindow())
        reuse = (window.ttl, claims.encode_release_on(window.release_on))
        if db.execute(sql.CLAIM_IF_FREE, (*claim, encoded, run_id, *reuse)).rowcount:
            continue
        held = codecs.held_from_row(db.execute(sql.GET_CLAIM, claim).fetchone())
        holder_id = held.run_id
        assert holder_id is not None  # CLAIM_IF_FREE takes released pairs
        if debounced is not None and request.debounce and key == request.debounce.key:
            generation = debounced.generation  # the holder keeps running
        elif claims.is_free(held, tx.now):
            generation = claims.next_generation(held)
        else:
            pruned = held.pruned_status is not None
            status = held.pruned_status
            if not pruned:
                row = db.execute(sql.GET_RUN, (holder_id,)).fetchone()
                status = codecs.run_from_row(row).status
            taken = claims.on_create(
                request.policy,
                key,
                value,
                (holder_id, held.generation),
                status,
                run_id,
                pruned,
            )
            if isinstance(taken, ClaimConflict):
                raise RollbackError(CreateRunResult(conflict=taken))
            if taken.cancel_reason is not None:
                tx.cancel(holder_id, taken.cancel_reason)
                superseded = holder_id
            generation = taken.generation
        params = (*claim, encoded, run_id, generation, None, None, *reuse)
        db.execute(sql.PUT_CLAIM, params)
    admitted, positions = tx.admit(request) if request.limits else ("hold", {})
    if isinstance(admitted, ClaimConflict):
        raise RollbackError(CreateRunResult(conflict=admitted))
    if request.limits:
        tx.take_slots(request, positions, holding=admitted == "hold")
    if ivalues:
        db.executemany(sql.UPSERT_ATTRIBUTE, [(run_id, key, iv) for key, iv in ivalues.items()])
    stored = runs.created_event(request.workflow, request.args, attributes, tx.now)
    tx.rows.append((run_id, 1, "run_created", codecs.encode(stored)))
    tx.flush_events()
    run = runs.new_run(run_id, request.workflow, attributes, tx.now)
    leased = None
    if task is not None:
        deadline = runs.deadline_item(request)
        if deadline is not None:
            run, _ = tx.enqueue(run, deadline, "", 0.0)
        first = commit_in(tx, task)
        return CreateRunResult(run=run, superseded_run_id=superseded, first=first)
    if admitted == "hold" and runs.runs_ahead(request):
        assert request.lease_to is not None
        wake = NewWorkItem(kind="workflow", lease=True)
        run, leased = tx.enqueue(run, wake, request.lease_to, request.lease_seconds)
    elif admitted == "hold":
        item = (run_id, workflow_item_id(run_id), "workflow", request.workflow, 0, 1)
        start_at = request.start_at
        if request.debounce is not None:
            start_at = claims.first_start(request.debounce, tx.now)
        due = tx.now_us if start_at is None else codecs.to_micros(start_at)
        db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, b"", due, None, 0, None, 0))
        tx.signals.add(WORK_TOPIC)
    deadline = runs.deadline_item(request)
    if deadline is not None:
        tx.enqueue(run, deadline, "", 0.0)
    return CreateRunResult(run=run, superseded_run_id=superseded, leased=leased)


def commit_in(tx: Writer, request: CommitRequest) -> CommitResult:
    """``request`` applied in transaction ``tx``."""
    lease = request.lease
    lease_key = (None, None, None) if lease is None else (lease.id, request.worker_id, lease.token)

    def body(tx: Writer) -> CommitResult:
        db = tx.db
        row = db.execute(sql.GET_RUN_FOR_COMMIT, (request.run_id, *lease_key)).fetchone()
        if row is None:
            raise LookupError(f"unknown run {request.run_id}")
        run = codecs.run_from_row(row)
        if run.status.is_closed:
            if request.discard is None:
                return commits.closed(run.status)
            run, stored = tx.stamp(run, request.discard)
            tx.save_run(run, None)
            return commits.closed(run.status, stored)
        held_kind, rewake = row["kind"], row["rewake"]
        if lease is not None and (held_kind is None or lease.run_id != run.id):
            owner = db.execute(sql.LEASE_HOLDER, (lease.run_id, lease.id)).fetchone()
            holder = None if owner is None else owner["owner"]
            discard = request.discard
            if discard is None:
                return commits.lost(run.status, holder)
            logged = db.execute(sql.READ_EVENTS, (run.id, 0)).fetchall()
            if settled(
                (codecs.decode_event(row["data"]) for row in logged),
                discard.step,
                discard.attempt,
            ):
                return commits.lost(run.status, holder)
            run, stored = tx.stamp(run, discard)
            tx.save_run(run, None)
            return commits.lost(run.status, holder, stored)
        if request.expect_seq is not None:
            rows = db.execute(sql.READ_EVENTS, (run.id, request.expect_seq - 1)).fetchall()
            if commits.stale(request, (codecs.decode_event(r["data"]) for r in rows)):
                return commits.stale_result(run.status)
        held = None if lease is None else (held_kind, bool(rewake))
        done = tx.commit(commits.commit_flow(run, request, tx.now, held), request)
        changed = None
        if done.attributes:
            rows = [(run.id, key, index_value(v)) for key, v in done.attributes.items()]
            db.executemany(sql.UPSERT_ATTRIBUTE, rows)
            changed = codecs.encode(done.run.attributes)
        tx.save_run(done.run, changed)
        return done.result

    return body(tx)


def resume_in(tx: Writer, token: str, payload: bytes, resume_id: str | None) -> str | None:
    """``World.resume_hook`` in transaction ``tx``: the run resumed, ``None`` if no run holds
    ``token``."""
    if resume_id is not None:
        seen = tx.db.execute(sql.GET_RESUME, (token, resume_id)).fetchone()
        if seen is not None:
            return str(seen["run_id"])
    found = tx.db.execute(sql.GET_HOOK, (token,)).fetchone()
    if found is None:
        return None
    run_id, number = found["run_id"], found["hook"]
    if resume_id is not None:
        tx.db.execute(sql.INSERT_RESUME, (token, resume_id, run_id))
    row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
    run = codecs.run_from_row(row)
    received = HookReceived(
        hook=number, payload=payload, resume_id=resume_id, token="" if number else token
    )
    run, _ = tx.stamp(run, received)
    run, _ = tx.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
    tx.save_run(run, None)
    return str(run_id)


def start_or_deliver_in(
    tx: Writer, request: CreateRunRequest, delivery: HookDelivery, claim: tuple[str, str]
) -> HookStartResult:
    """``World.start_or_resume_hook`` in transaction ``tx`` (its checks done): deliver to the
    holder of ``claim``, or create the run and deliver to it."""
    if delivery.resume_id is not None:
        seen = tx.db.execute(sql.GET_RESUME, (delivery.token, delivery.resume_id))
        row = seen.fetchone()
        if row is not None:
            return HookStartResult(run_id=str(row["run_id"]))
    held = tx.db.execute(sql.GET_CLAIM, claim).fetchone()
    if held is not None and held["run_id"] is not None:
        holder = tx.db.execute(sql.GET_RUN, (held["run_id"],)).fetchone()
        if resume.route(codecs.run_from_row(holder).status) == "deliver":
            return tx.deliver(held["run_id"], delivery)
    hook = tx.db.execute(sql.GET_HOOK, (delivery.token,)).fetchone()
    if hook is not None:  # another run holds the token: create nothing
        return HookStartResult(run_id=hook["run_id"], hook_holder=hook["run_id"])
    created = create_in(tx, request, None)
    assert created.run is not None, "a conflict rolled the transaction back"
    delivered = tx.deliver(request.run_id, delivery)
    record = codecs.run_from_row(tx.db.execute(sql.GET_RUN, (request.run_id,)).fetchone())
    return msgspec.structs.replace(delivered, created=True, run=record)


def reopen_in(tx: Writer, run_id: str, by: str) -> RunRecord | None:
    """``World.reopen_run`` in transaction ``tx``."""
    row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
    if row is None:
        return None
    run = codecs.run_from_row(row)
    logged = tx.db.execute(sql.READ_EVENTS, (run_id, 0)).fetchall()
    events = [codecs.decode_event(r["data"]) for r in logged]
    plan = reopen.plan_reopen(run, events, by)
    if plan.event is None:
        return run
    run, _ = tx.stamp(run, plan.event)
    for new in plan.work:
        run, _ = tx.enqueue(run, new, "", 0.0)
    tx.save_run(run, row["attributes"])
    return run


def fork_in(
    tx: Writer, source_run_id: str, run_id: str, from_step: int, by: str
) -> RunRecord | None:
    """``World.fork_run`` in transaction ``tx``."""
    db = tx.db
    row = db.execute(sql.GET_RUN, (source_run_id,)).fetchone()
    if row is None:
        return None
    source = codecs.run_from_row(row)
    logged = db.execute(sql.READ_EVENTS, (source_run_id, 0)).fetchall()
    events = [codecs.decode_event(r["data"]) for r in logged]
    plan = reopen.plan_fork(source, events, from_step, by)
    encoded = codecs.encode(plan.attributes)
    try:
        db.execute(sql.INSERT_RUN, (run_id, source.workflow, tx.now_us, encoded))
    except sqlite3.IntegrityError:
        raise requests.run_exists(run_id) from None
    created = runs.created_event(source.workflow, plan.args, plan.attributes, tx.now)
    tx.rows.append((run_id, 1, "run_created", codecs.encode(created)))
    run = runs.new_run(run_id, source.workflow, plan.attributes, tx.now)
    for event in plan.events:
        run, _ = tx.stamp(run, event)
    for new in plan.work:
        run, _ = tx.enqueue(run, new, "", 0.0)
    db.executemany(
        sql.UPSERT_ATTRIBUTE,
        [(run_id, key, index_value(value)) for key, value in run.attributes.items()],
    )
    tx.save_run(run, codecs.encode(run.attributes))
    return run
