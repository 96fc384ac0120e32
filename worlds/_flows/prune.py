"""Pruning: ``World.prune_runs``, for every backend.

The runs closed before the cut go, oldest first, at most ``limit`` of them,
with every row of theirs. Claims whose lapse time passed are released first,
whoever held them; then the pruned runs' claims are released, or (by default)
kept as tombstones naming the run's final status, which keep refusing the
pair. With ``release_claims`` the tombstones earlier prunes kept are released
too: the flag means "pruned runs hold no claims", and a tombstone keeps no
close time to tell which of them closed before the cut. Every released pair
keeps its generation (``worlds._rules.claims``).
"""

from __future__ import annotations

from datetime import datetime

from worlds._flows.rows import Rows

__all__ = ["prune_runs"]


async def prune_runs(
    rows: Rows, closed_before: datetime, limit: int, *, release_claims: bool
) -> list[str]:
    """See ``World.prune_runs``: the ids pruned, oldest first."""
    if limit <= 0:
        return []
    pruned = await rows.prunable(closed_before, limit)
    await rows.release_lapsed_claims()
    await rows.retire_claims(pruned, release=release_claims)
    if release_claims:
        await rows.release_tombstones()
    await rows.delete_runs(pruned)
    return pruned
