"""Releasing one claim: ``World.release_claim``, for every backend.

The way out of a tombstone an operator asks for (``release_claims`` in the
client, ``wf attributes release``): the pair's claim row is read (locked), its
holder's status looked up unless the holder was pruned, and
``worlds._rules.claims.on_release`` decides. A released pair keeps its
generation, so its next holder gets a higher one (fencing tokens never go
back); a pair held by an open run is left alone and answered as a conflict.

The holder's run row is read without a lock: a closed run only changes again
by ``reopen_run``, which keeps the claims it still holds and so would find this
one released, as if its reuse window had freed it when it closed.
"""

from __future__ import annotations

from worlds._flows.rows import Rows
from worlds._rules.claims import on_release
from worlds.semantics import index_value
from worlds.types import AttributeValue, Claim, ClaimConflict, RunStatus

__all__ = ["release_claim"]


async def release_claim(
    rows: Rows, key: str, value: AttributeValue
) -> Claim | ClaimConflict | None:
    """See ``World.release_claim``: the claim as it was before it was released,
    ``None`` for a free pair, a ``ClaimConflict`` for a pair an open run holds."""
    pair = (key, index_value(value))
    held = await rows.get_claim(pair, lock=True)
    status: RunStatus | None = None
    if held is not None and held.run_id is not None and held.pruned_status is None:
        holder = await rows.get_run(held.run_id, lock=False)
        status = None if holder is None else holder.status
    decision = on_release(held, status, rows.now)
    if decision == "free":
        return None
    assert held is not None and held.run_id is not None
    if decision == "open":
        return ClaimConflict(key=key, value=value, holder_run_id=held.run_id, holder_status=status)
    await rows.release_claim(pair)
    return Claim(
        key=key,
        value=value,
        run_id=held.run_id,
        generation=held.generation,
        step=held.step,
        ttl=held.window.ttl,
        release_on=held.window.release_on,
        lapses_at=held.lapses_at,
        pruned_status=held.pruned_status,
    )
