"""Slot history: sampling the pairs a transaction changed, and pruning old samples.

``sample`` runs inside the slot flows' own transactions (``worlds._flows.slots``),
after the rows of the pairs changed, so a sample never disagrees with the
rows it counts; ``prune`` is ``World.prune_slot_history``. The minute and the
cutoff are ``worlds._rules.slot_history``'s.
"""

from __future__ import annotations

from collections.abc import Iterable

from worlds._flows.rows import Pair, Rows
from worlds._flows.tx import Tx
from worlds._rules import slot_history

__all__ = ["prune", "sample"]


async def sample(tx: Tx, pairs: Iterable[Pair]) -> None:
    """Record the holders and waiters of ``pairs`` now in their sample of this minute."""
    chosen = slot_history.sampled(pairs)
    if chosen:
        await tx.rows.sample_slots(chosen, slot_history.minute_of(tx.rows.now))


async def prune(rows: Rows, keep: float, limit: int) -> int:
    """See ``World.prune_slot_history``: the samples deleted."""
    cut = slot_history.cutoff(rows.now, keep)
    if limit <= 0:
        return 0
    return await rows.drop_slot_samples(cut, limit)
