"""Pruning: ``World.prune_runs``, ``prune_listed``, ``prune_expired`` and ``pin_run``.

The runs closed before the cut go, oldest first, at most ``limit`` of them,
with every row of theirs. Claims whose lapse time passed are released first,
whoever held them; then the pruned runs' claims are released, or (by default)
kept as tombstones naming the run's final status, which keep refusing the
pair. With ``release_claims`` the tombstones earlier prunes kept are released
too: the flag means "pruned runs hold no claims", and a tombstone keeps no
close time to tell which of them closed before the cut. Every released pair
keeps its generation (``worlds._rules.claims``). A pinned run is never pruned
(``worlds._rules.retention``): the rows pass it over, and a listed one is
left where it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from worlds._flows.rows import Rows
from worlds._rules import retention
from worlds.types import RunRecord, RunStatus

__all__ = ["pin_run", "prune_expired", "prune_listed", "prune_runs"]


async def prune_runs(
    rows: Rows, closed_before: datetime, limit: int, *, release_claims: bool
) -> list[str]:
    """See ``World.prune_runs``: the ids pruned, oldest first."""
    if limit <= 0:
        return []
    pruned = await rows.prunable(closed_before, limit)
    await _delete(rows, pruned, release_claims=release_claims)
    return pruned


async def prune_expired(
    rows: Rows, keep: Mapping[RunStatus, float], limit: int, *, release_claims: bool
) -> list[str]:
    """See ``World.prune_expired``: the ids pruned, each status's oldest first."""
    pruned: list[str] = []
    for status, cut in retention.cutoffs(keep, rows.now):
        if len(pruned) >= limit:
            break
        pruned += await rows.prunable(cut, limit - len(pruned), status=status)
    await _delete(rows, pruned, release_claims=release_claims)
    return pruned


async def prune_listed(rows: Rows, run_ids: Sequence[str], *, release_claims: bool) -> list[str]:
    """See ``World.prune_listed``: the ids pruned, in id order."""
    found: dict[str, RunRecord | None] = {}
    for run_id in sorted(set(run_ids)):  # one lock order for every caller
        found[run_id] = await rows.get_run(run_id)
    pruned = retention.prunable(found)
    await _delete(rows, pruned, release_claims=release_claims)
    return pruned


async def pin_run(rows: Rows, run_id: str, pin: bool) -> RunRecord | None:
    """See ``World.pin_run``."""
    run = await rows.get_run(run_id)
    if run is None:
        return None
    changed = retention.pinned(run, pin)
    if changed is run:
        return run
    await rows.save_run(changed)
    if pin:
        await rows.index_attributes(run_id, {retention.PIN_KEY: True})
    else:
        await rows.drop_attribute(run_id, retention.PIN_KEY)
    return changed


async def _delete(rows: Rows, pruned: list[str], *, release_claims: bool) -> None:
    await rows.release_lapsed_claims()
    await rows.retire_claims(pruned, release=release_claims)
    if release_claims:
        await rows.release_tombstones()
    await rows.delete_runs(pruned)
