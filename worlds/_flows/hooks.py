"""Hooks from outside: ``World.resume_hook`` and ``start_or_resume_hook``, for every backend.

A delivery with a resume id seen before answers the run it went to and writes
nothing (exactly once per resume id). Otherwise the payload goes to the run
holding the token as ``HookReceived`` (hook 0, with the token, for a token held
unbound) and the run's workflow is woken. ``start_or_resume_hook`` delivers to
the open holder of its pair, or creates the run (``create.create_in``) and
delivers to it, per ``worlds._rules.resume``; a token another run holds writes
nothing and the result names that run.
"""

from __future__ import annotations

from worlds._flows import closing, create, work
from worlds._flows.rows import HookRow, Retry, Rollback, Rows
from worlds._flows.tx import Tx
from worlds._rules import requests, resume
from worlds.semantics import index_value
from worlds.types import CreateRunRequest, CreateRunResult, HookDelivery, HookStartResult, RunRecord

__all__ = ["check_start_or_resume", "resume_hook", "start_or_resume_hook"]


def check_start_or_resume(request: CreateRunRequest) -> None:
    """Raise ``ValueError`` for a request ``start_or_resume_hook`` cannot take (it needs
    a policy naming its unique key; ``create.check``), before any transaction."""
    resume.check_request(request)
    requests.check_create(request)


async def resume_hook(rows: Rows, token: str, payload: bytes, resume_id: str | None) -> str | None:
    """See ``World.resume_hook``: the run resumed, ``None`` if no open run holds ``token``."""
    tx = Tx(rows)
    if resume_id is not None:
        seen = await rows.resumed(token, resume_id)
        if seen is not None:
            return seen
    found = await rows.hook_run(token)
    if found is None:
        return None
    run, number = found
    if resume_id is not None and not await rows.record_resume(token, resume_id, run.id):
        answered = await rows.resumed(token, resume_id)  # a concurrent delivery came first
        assert answered is not None
        return answered
    delivery = HookDelivery(token=token, payload=payload, resume_id=resume_id)
    run, _ = tx.stamp(run, resume.received(number, delivery))
    await closing.save(tx, await work.wake(tx, run))
    return run.id


async def start_or_resume_hook(
    rows: Rows, request: CreateRunRequest, delivery: HookDelivery
) -> HookStartResult:
    """See ``World.start_or_resume_hook`` (``request`` checked by ``check_start_or_resume``).

    Raises ``Rollback`` with the answer when the policy refuses to take the pair
    over, and ``Retry`` when a concurrent transaction took the token first.
    """
    tx = Tx(rows)
    key = resume.check_request(request)
    if delivery.resume_id is not None:
        seen = await rows.resumed(delivery.token, delivery.resume_id)
        if seen is not None:
            return HookStartResult(run_id=seen)
    # The token first, then the pair: a concurrent creator commits both at once, so a
    # token seen held means its pair is seen too (the other order could see the
    # token taken by the very holder it missed, and lose the payload).
    other = await rows.hook_holder(delivery.token)
    held = await rows.get_claim((key, index_value(request.attributes[key])), lock=True)
    if held is not None and held.run_id is not None:
        holder = await rows.get_run(held.run_id)
        if holder is not None and resume.route(holder.status) == "deliver":
            return await _deliver(tx, holder, delivery, created=False)
    if other is not None:  # another run holds the token: create nothing
        return HookStartResult(run_id=other.run_id, hook_holder=other.run_id)
    try:
        created = await create.create_for_pair(tx, request, key)
    except Rollback as refused:
        assert isinstance(refused.result, CreateRunResult) and refused.result.conflict
        raise Rollback(HookStartResult(run_id=refused.result.conflict.holder_run_id)) from None
    assert created.run is not None, "start_or_resume_hook takes no debounce"
    delivered = await _deliver(tx, created.run, delivery, created=True)
    if delivered.hook_holder is not None:
        raise Retry  # a concurrent delivery took the token after we looked
    return delivered


async def _deliver(
    tx: Tx, run: RunRecord, delivery: HookDelivery, *, created: bool
) -> HookStartResult:
    """Give ``delivery`` to open ``run`` (locked): to the hook holding its token, or
    taking the token unbound; nothing when another run holds the token."""
    rows, token, number = tx.rows, delivery.token, 0
    if not await rows.insert_hook(HookRow(token, run.id, 0, {})):
        holder = await rows.hook_holder(token)
        assert holder is not None, "hooks go only with their run, which is locked"
        if holder.run_id != run.id:
            return HookStartResult(run_id=run.id, hook_holder=holder.run_id)
        number = holder.hook
    if delivery.resume_id is not None and not await rows.record_resume(
        token, delivery.resume_id, run.id
    ):
        seen = await rows.resumed(token, delivery.resume_id)  # a concurrent delivery came first
        return HookStartResult(run_id=str(seen))
    run, _ = tx.stamp(run, resume.received(number, delivery))
    run = await work.wake(tx, run)
    await closing.save(tx, run)
    return HookStartResult(run_id=run.id, created=created, run=run if created else None)
