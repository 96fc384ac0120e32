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

from worlds._flows import work
from worlds._flows.rows import Pair, SlotRow
from worlds._flows.tx import Tx
from worlds._rules import slots
from worlds.semantics import index_value
from worlds.types import ClaimConflict, CreateRunRequest, SlotAcquired, SlotRequested

__all__ = ["acquire", "admit", "promote", "release_hold", "take"]


async def admit(tx: Tx, request: CreateRunRequest) -> str | ClaimConflict:
    """What the new run of ``request`` does at its limited pairs (``slots.admit``)."""
    if not request.limits:
        return "hold"
    keys = list(request.limits)
    pairs = [(key, index_value(request.attributes[key])) for key in keys]
    states = await tx.rows.slot_states(pairs)
    return slots.admit(request, dict(zip(keys, states, strict=True)))


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
        )
        for key, limit in sorted(request.limits.items())
    ]
    await tx.rows.insert_slots(rows, holding=holding)


async def acquire(tx: Tx, run_id: str, event: SlotRequested) -> SlotRequested:
    """A ``hold()``'s row at its pair: the slot if ``slots.admit_hold`` says so, else in line."""
    pair = (event.key, index_value(event.value))
    (state,) = await tx.rows.slot_states([pair])
    acquired = slots.admit_hold(state, event.limit)
    row = SlotRow(pair, event.value, run_id, event.limit, event.hold)
    await tx.rows.insert_slots([row], holding=acquired)
    return msgspec.structs.replace(event, acquired=acquired)


async def release_hold(tx: Tx, run_id: str, hold: int) -> None:
    """Drop hold ``hold`` of ``run_id`` (its slot or place in line); promote whom that admits."""
    await promote(tx, await tx.rows.drop_hold(run_id, hold))


async def promote(tx: Tx, freed: Sequence[Pair]) -> None:
    """Promote whom the ``freed`` pairs (slots or places in line gone) now admit."""
    if not freed:
        return
    flow = slots.promote_flow(freed)
    reply: object = None
    while True:
        try:
            need = flow.send(reply)
        except StopIteration:
            return
        reply = await _do(tx, need)


async def _do(tx: Tx, need: slots.Need) -> object:
    """What ``promote_flow`` asks for, read or done; the reply it gets."""
    rows = tx.rows
    match need:
        case slots.Head(pair=pair):
            return await rows.first_waiter(pair)
        case slots.Views(run_id=run_id, hold=hold):
            return await rows.waiting_views(run_id, hold)
        case slots.Promote(run_id=run_id, hold=hold):
            await rows.promote(run_id, hold)
            if hold:  # a hold() block: its run hears it holds the slot, and wakes
                run = await rows.get_run(run_id)
                assert run is not None, "a waiting hold's run is open"
                run, _ = tx.stamp(run, SlotAcquired(hold=hold))
                run = await work.wake(tx, run)
                await rows.save_run(run)
            return None
        case _:
            assert_never(need)
