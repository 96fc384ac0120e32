"""Limited pairs' slots: a new run's admission, ``hold()`` blocks, and promotion.

``worlds._rules.slots`` decides (``admit``, ``admit_hold``, ``promote_flow``);
this module reads the pairs' rows it needs, asks, and writes the outcome. A
pair's rows are read and written under its lock (``Rows.slot_states`` and the
``drop_*`` methods take it), so two transactions never both admit into the
last free slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

import msgspec

from worlds._flows import keys as keys_flow
from worlds._flows import slot_history, work
from worlds._flows.rows import Pair, SlotRow
from worlds._flows.tx import Tx
from worlds._rules import key_limits, reopen, slots
from worlds.semantics import index_value
from worlds.types import (
    ClaimConflict,
    CreateRunRequest,
    EventKind,
    RunRecord,
    RunStatus,
    SlotAcquired,
    SlotRequested,
)

__all__ = ["acquire", "admit", "promote", "release_hold", "retake", "take"]


async def admit(tx: Tx, request: CreateRunRequest) -> str | ClaimConflict:
    """What the new run of ``request`` does at its limited pairs (``slots.admit``) and
    their keys' limits (``key_limits.admit``); a run that holds at once is served a
    slot of each limited key (its value's share moves on)."""
    if not request.limits:
        return "hold"
    keys = list(request.limits)
    pairs = [(key, index_value(request.attributes[key])) for key in keys]
    states = await tx.rows.slot_states(pairs)
    queues = all(limit.on_full == "queue" for limit in request.limits.values())
    if queues and all(state.waiting for state in states):  # behind waiters, unless a key says more
        queued = [await tx.rows.key_queued(*pair) for pair in pairs]
        if key_limits.waits_behind([state.waiting for state in states], queued):
            return slots.admit(request, dict(zip(keys, states, strict=True)))
    limited = await keys_flow.states(tx, keys)
    caps = {
        key: key_limits.pair_cap(limit.limit, limit.burst, limited[key])
        for key, limit in request.limits.items()
    }
    refusals = {
        key: key_limits.refusal(key, request.attributes[key], state)
        for key, state in limited.items()
        if state is not None and key_limits.full(state)
    }
    verdict = slots.admit(request, dict(zip(keys, states, strict=True)), caps, refusals)
    verdict = key_limits.admit(request, verdict, limited)
    if verdict == "hold":
        served = [key_limits.key_pair(key) for key, found in limited.items() if found is not None]
        await keys_flow.serve(tx, [*pairs, *served])
    elif verdict == "wait":  # its values join their keys' lines
        for (key, ivalue), pair_state in zip(pairs, states, strict=True):
            if limited[key] is not None:
                await keys_flow.enter(tx, key, ivalue, line_empty=pair_state.waiting == 0)
    return verdict


async def take(tx: Tx, request: CreateRunRequest, *, holding: bool) -> None:
    """The new run's row at each of its limited pairs: a slot, or a place in line."""
    if not request.limits:
        return
    rows = [
        SlotRow(
            (key, index_value(request.attributes[key])),
            request.attributes[key],
            request.run_id,
            limit.limit,
            0,
            request.priority,
            limit.burst,
        )
        for key, limit in sorted(request.limits.items())
    ]
    await tx.rows.insert_slots(rows, holding=holding)
    await slot_history.sample(tx, [row.pair for row in rows])


async def acquire(tx: Tx, run_id: str, event: SlotRequested) -> SlotRequested:
    """A ``hold()``'s row at its pair: the slot if ``slots.admit_hold`` says so, else in
    line; no row, and the event ``refused``, when the pair is held with another limit."""
    pair = (event.key, index_value(event.value))
    (state,) = await tx.rows.slot_states([pair])
    refused = slots.hold_refused(state, event.limit)
    if refused is not None:
        return msgspec.structs.replace(event, refused=refused)
    acquired = slots.admit_hold(state, event.limit)
    row = SlotRow(pair, event.value, run_id, event.limit, event.hold, event.priority)
    await tx.rows.insert_slots([row], holding=acquired)
    await slot_history.sample(tx, [pair])
    return msgspec.structs.replace(event, acquired=acquired)


async def retake(tx: Tx, run: RunRecord, log: Sequence[EventKind]) -> RunRecord | None:
    """Take again the slots reopened or forked ``run`` (replayed log ``log``) needs
    (``slots.retake``): all at once, the run after it; or none, waiting in line
    (``slots.REOPENING`` rows), ``None``: its work then waits for the promotion.

    Raises ``ValueError`` (nothing written) when a pair is held with another limit.
    """
    need = slots.retake(log)
    if not need.held:
        return await _enter(tx, run, need)
    pairs = [(n.key, index_value(n.value)) for n in need.held]
    pair_states = await tx.rows.slot_states(pairs)
    enters = slots.enters_again(need.held, pair_states)
    keyed = await keys_flow.states(tx, [n.key for n in need.held if n.hold == 0])
    if enters and not any(key_limits.full(found) for found in keyed.values()):
        return await _enter(tx, run, need)
    line: dict[Pair, SlotRow] = {}
    for pair, n in zip(pairs, need.held, strict=True):
        row = SlotRow(pair, n.value, run.id, n.limit, slots.REOPENING, n.priority)
        line.setdefault(pair, row)
    for (key, ivalue), pair_state in zip(pairs, pair_states, strict=True):
        if keyed.get(key) is not None:  # its values join their keys' lines
            await keys_flow.enter(tx, key, ivalue, line_empty=pair_state.waiting == 0)
    await tx.rows.insert_slots(list(line.values()), holding=False)
    await slot_history.sample(tx, line)
    return None


async def _enter(tx: Tx, run: RunRecord, need: slots.Retake) -> RunRecord:
    """``run`` holds the slots of ``need.held`` and its waiting blocks are in line
    (or enter, ``SlotAcquired``, where a slot is free); the run after it."""
    by_hold: dict[int, list[SlotRow]] = {}
    for n in need.held:
        row = SlotRow((n.key, index_value(n.value)), n.value, run.id, n.limit, n.hold, n.priority)
        by_hold.setdefault(n.hold, []).append(row)
    for rows in by_hold.values():  # a backend writes one run's rows of one hold at a time
        await tx.rows.insert_slots(rows, holding=True)
    for n in need.waiting:
        pair = (n.key, index_value(n.value))
        (state,) = await tx.rows.slot_states([pair])
        slots.check_pair_limit(n.key, n.value, state, n.limit)
        entered = slots.admit_hold(state, n.limit)
        row = SlotRow(pair, n.value, run.id, n.limit, n.hold, n.priority)
        await tx.rows.insert_slots([row], holding=entered)
        if entered:
            run, _ = tx.stamp(run, SlotAcquired(hold=n.hold))
    pairs = [(n.key, index_value(n.value)) for n in (*need.held, *need.waiting)]
    await slot_history.sample(tx, pairs)
    return run


async def _reenter(tx: Tx, run_id: str) -> None:
    """Promoted reopened or forked ``run_id`` takes its slots again and gets its work."""
    rows = tx.rows
    run = await rows.get_run(run_id)
    assert run is not None, "a waiting run is open"
    await rows.drop_hold(run_id, slots.REOPENING)
    log = reopen.effective_log(await rows.events(run_id))
    run = await _enter(tx, run, slots.retake(log))
    run = msgspec.structs.replace(run, status=RunStatus.RUNNING)
    for new in reopen.held_back_work(run.workflow, log):
        run, _ = await work.enqueue(tx, run, new)
    await rows.save_run(run)


async def release_hold(tx: Tx, run_id: str, hold: int) -> None:
    """Drop hold ``hold`` of ``run_id`` (its slot or place in line); promote whom that admits."""
    await promote(tx, await tx.rows.drop_hold(run_id, hold))


async def promote(tx: Tx, freed: Sequence[Pair]) -> None:
    """Promote whom the ``freed`` pairs (slots or places in line gone) now admit; the
    freed pairs and those the promoted took are sampled once it is done."""
    if not freed:
        return
    flow = slots.promote_flow(keys_flow.lines(freed))
    choices: keys_flow.Choices = {}
    changed = set(freed)
    reply: object = None
    while True:
        try:
            need = flow.send(reply)
        except StopIteration:
            await slot_history.sample(tx, changed)
            return
        if isinstance(need, slots.Promote):
            changed.update(need.pairs)
        reply = await _do(tx, need, choices)


async def _do(tx: Tx, need: slots.Need, choices: keys_flow.Choices) -> object:
    """What ``promote_flow`` asks for, read or done; the reply it gets."""
    rows = tx.rows
    match need:
        case slots.Head(pair=pair) if key_limits.is_key_pair(pair):
            return await keys_flow.head(tx, pair[0], choices)
        case slots.Head(pair=pair):
            first = await rows.first_waiter(pair)
            return None if await keys_flow.defers(tx, first, pair[0]) else first
        case slots.Views(run_id=run_id, hold=hold):
            found = await rows.waiting_views(run_id, hold, keys_flow.chosen_at(choices, need))
            return await keys_flow.views(tx, hold, found, choices)
        case slots.Promote():
            known = keys_flow.passes(choices)
            choices.clear()  # the promotion changes what the keys choose next
            await _promote(tx, need, known)
            return None
        case _:
            assert_never(need)


async def _promote(tx: Tx, need: slots.Promote, known: dict[Pair, float]) -> None:
    """Waiter (``need.run_id``, ``need.hold``) takes its slots (``Promote``); ``known``:
    the passes of the values its keys chose, as read."""
    rows = tx.rows
    match need:
        case slots.Promote(run_id=run_id, pairs=pairs, hold=slots.REOPENING):
            await keys_flow.serve(tx, pairs, known)
            await _reenter(tx, run_id)
        case slots.Promote(run_id=run_id, pairs=pairs, hold=hold):
            await keys_flow.serve(tx, pairs, known)
            await rows.promote(run_id, hold)
            if hold:  # a hold() block: its run hears it holds the slot, and wakes
                run = await rows.get_run(run_id)
                assert run is not None, "a waiting hold's run is open"
                run, _ = tx.stamp(run, SlotAcquired(hold=hold))
                run = await work.wake(tx, run)
                await rows.save_run(run)
