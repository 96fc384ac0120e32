"""Key limits inside slot admission and promotion, for every backend.

``worlds._rules.key_limits`` decides (``pick``, ``pair_cap``, ``served``); this
module reads the key rows those need: a limited key's state (locked), the
values waiting in it, and it stores a served value's share. The slots flow
(``worlds._flows.slots``) calls it where a run meets its limited pairs and
wherever ``promote_flow`` asks about a key's own line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worlds._flows.rows import Pair
from worlds._flows.tx import Tx
from worlds._rules import key_limits
from worlds._rules.key_limits import Candidate, KeyState
from worlds._rules.slots import PairView, Waiter

__all__ = ["choose", "head", "lines", "serve", "state", "states", "views"]


async def state(tx: Tx, key: str) -> KeyState | None:
    """The limit of ``key`` and its use, the key locked; ``None``: no limit."""
    row = await tx.rows.key_row(key)
    if row is None:
        return None
    weights = key_limits.weight_of(row.limit.weights)
    return KeyState(row.limit.limit, row.holding, row.vtime, weights, row.holder)


async def states(tx: Tx, keys: Iterable[str]) -> dict[str, KeyState | None]:
    """``state`` of each of ``keys``, read (and locked) in sorted order."""
    return {key: await state(tx, key) for key in sorted(set(keys))}


async def choose(tx: Tx, key: str) -> tuple[KeyState, Candidate | None] | None:
    """The limited key's state and the waiter it admits next (``key_limits.pick``);
    ``None`` when the key has no limit."""
    found = await state(tx, key)
    if found is None:
        return None
    waiting = await tx.rows.key_waiting(key)
    return found, key_limits.pick(found, [c for c in waiting if key_limits.needs_key(c.head[1])])


async def head(tx: Tx, key: str) -> Waiter | None:
    """The first waiter of the key's own line: whom the key admits next, if it has room."""
    chosen = await choose(tx, key)
    if chosen is None or key_limits.full(chosen[0]) or chosen[1] is None:
        return None
    return chosen[1].head


async def views(tx: Tx, hold: int, found: Sequence[PairView]) -> list[PairView]:
    """The pairs a waiter of ``hold`` waits in (``found``), with its keys' own lines
    when they are limited: its pair's cap there counts its burst, and the key is one
    more view (its limit, its slots held and the waiter it chose)."""
    if not key_limits.needs_key(hold):
        return list(found)
    out: list[PairView] = []
    for view in found:
        key = view.pair[0]
        chosen = await choose(tx, key)
        if chosen is None:
            out.append(view)
            continue
        key_state, candidate = chosen
        cap = key_limits.pair_cap(view.limit, view.burst, key_state)
        out.append(view._replace(limit=cap))
        out.append(key_limits.key_view(key, key_state, candidate))
    return out


async def serve(tx: Tx, pairs: Sequence[Pair]) -> None:
    """A waiter promoted at ``pairs`` took a slot of each limited key among them:
    its value's share moves on (``key_limits.served``)."""
    for key, value in pairs:
        if key_limits.is_key_pair((key, value)):
            continue
        if key_limits.key_pair(key) not in pairs:
            continue
        found = await state(tx, key)
        if found is None:
            continue
        share = await tx.rows.key_share(key, value)
        share, vtime = key_limits.served(found, value, share)
        await tx.rows.put_key_share(key, value, share, vtime)


def lines(freed: Iterable[Pair]) -> list[Pair]:
    """``freed`` with the own lines of their keys: a slot freed at a pair frees one of
    its key too (when the key is limited), whose line then admits its choice."""
    out = set(freed)
    out |= {key_limits.key_pair(key) for key, _ in out}
    return sorted(out)
