"""Settling what a commit claims: a unique attribute's pair, a hook's token.

A unique ``AttributeSet`` takes its pair when it is free (``claims.on_attribute_set``:
its generation) or becomes the ``AttributeConflict`` naming the holder; a
``HookCreated`` takes its token, binds the token its run holds unbound, or
becomes the ``HookConflict`` naming the run that holds it.
"""

from __future__ import annotations

import msgspec

from worlds._flows.rows import ClaimRow, HookRow
from worlds._flows.tx import Tx
from worlds._rules import claims
from worlds.semantics import index_value
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    EventKind,
    HookConflict,
    HookCreated,
    ReuseWindow,
)

__all__ = ["settle_claim", "settle_hook"]


async def settle_claim(tx: Tx, run_id: str, event: AttributeSet) -> EventKind:
    """The event a unique ``AttributeSet`` of ``run_id`` becomes: claimed, or a conflict."""
    rows = tx.rows
    pair = (event.key, index_value(event.value))
    window = ReuseWindow(ttl=event.ttl, release_on=event.release_on)
    claim = ClaimRow(pair, event.value, run_id, event.step, event.attempt, window)
    generation = await rows.claim_if_free(claim)
    if generation is None:
        held = await rows.get_claim(pair)
        decided = claims.on_attribute_set(held, run_id, event, tx.rows.now)
        if isinstance(decided, AttributeConflict):
            return decided
        generation = decided
        window = claims.window_on_set(held, run_id, event, tx.rows.now)
        await rows.put_claim(claim._replace(window=window), generation)
    return msgspec.structs.replace(event, generation=generation)


async def settle_hook(tx: Tx, run_id: str, event: HookCreated) -> EventKind:
    """The event a ``HookCreated`` of ``run_id`` becomes: the hook, or a conflict."""
    rows, hook = tx.rows, HookRow(event.token, run_id, event.hook, event.attributes)
    while True:
        if await rows.insert_hook(hook) or await rows.bind_hook(hook):
            return event
        holder = await rows.hook_holder(event.token)
        if holder is not None:
            return HookConflict(hook=event.hook, token=event.token, holder_run_id=holder.run_id)
        # the holder let the token go between the two reads (another transaction): again
