"""Key limits inside slot admission and promotion, for every backend.

``worlds._rules.key_limits`` decides (``pick``, ``decided``, ``entry``,
``pair_cap``, ``served``); this module reads the key rows those need: a limited
key's state (locked), the head of its line of values waiting, and it stores a
served or entering value's pass. The slots flow (``worlds._flows.slots``) calls
it where a run meets its limited pairs and wherever ``promote_flow`` asks about
a key's own line.

The line is read from its head a page at a time until ``decided``: a promotion
reads the few values ahead of the one it admits, not every value waiting. A
value whose pair has no row in line any more is taken out as the walk meets it
(the line is tidied lazily, so closing or cancelling a waiter writes nothing
here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from worlds._flows.rows import Pair
from worlds._flows.tx import Tx
from worlds._rules import key_limits
from worlds._rules.key_limits import Candidate, KeyState
from worlds._rules.slots import PairView, Views, Waiter

__all__ = [
    "Choices",
    "choose",
    "chosen_at",
    "defers",
    "enter",
    "enter_all",
    "head",
    "lines",
    "passes",
    "serve",
    "state",
    "states",
    "views",
]

PAGE = 8
"""Values read from a key's line at a time: the head and the few a full pair skips."""


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


Choices = dict[str, tuple[KeyState, Candidate | None] | None]
"""What ``choose`` found per key since the last write of one promotion: ``promote_flow``
asks a key's ``Head`` and then its chosen waiter's ``Views``, which read the same."""


async def choose(
    tx: Tx, key: str, choices: Choices | None = None
) -> tuple[KeyState, Candidate | None] | None:
    """The limited key's state and the waiter it admits next (``key_limits.pick``;
    nobody when the key is full); ``None`` when the key has no limit."""
    if choices is not None and key in choices:
        return choices[key]
    found = await state(tx, key)
    chosen: tuple[KeyState, Candidate | None] | None = None
    if found is not None and key_limits.full(found):
        chosen = found, None  # nobody: the values waiting need not be read
    elif found is not None:
        chosen = found, key_limits.pick(found, await _walk(tx, key))
    if choices is not None:
        choices[key] = chosen
    return chosen


async def _walk(tx: Tx, key: str) -> list[Candidate]:
    """The head of the line of ``key``, up to where ``key_limits.decided`` (or its end):
    the candidates ``pick`` chooses from. Values with nothing in line leave it."""
    out: list[Candidate] = []
    after: tuple[float, str] | None = None
    while True:
        page = await tx.rows.key_line(key, after, PAGE)
        for entry in page:
            if entry.candidate is None:
                await tx.rows.leave_key_line(key, entry.ivalue)
            elif key_limits.needs_key(entry.candidate.head[1]):
                out.append(entry.candidate)
        if len(page) < PAGE or key_limits.decided(out):
            return out
        after = (page[-1].share, page[-1].ivalue)


async def enter(tx: Tx, key: str, ivalue: str, *, line_empty: bool) -> None:
    """A run that needs a slot of limited ``key`` joins the line of value ``ivalue``
    (``line_empty``: nobody was in line there): the value takes its place in the
    key's line (``key_limits.entry``); nothing when ``key`` has no limit."""
    found = await state(tx, key)
    if found is None:
        return
    share, queued = await tx.rows.key_pass(key, ivalue)
    placed = key_limits.entry(share, queued, found.vtime, line_empty)
    if placed is not None:
        await tx.rows.put_key_pass(key, ivalue, placed)


async def enter_all(tx: Tx, key: str) -> None:
    """Every value of ``key`` with runs in line takes its place in the key's line (a
    limit was set): one read of every waiting value, as setting a limit is rare."""
    for found in await tx.rows.key_waiting(key):
        await enter(tx, key, found.ivalue, line_empty=False)


async def head(tx: Tx, key: str, choices: Choices | None = None) -> Waiter | None:
    """The first waiter of the key's own line: whom the key admits next, if it has room."""
    chosen = await choose(tx, key, choices)
    if chosen is None or chosen[1] is None:
        return None
    return chosen[1].head


async def defers(tx: Tx, waiter: Waiter | None, key: str) -> bool:
    """Whether ``waiter``, first in line at a pair of ``key``, is promoted through its
    key's own line instead (it needs a key slot and the key is limited): that line is
    looked at whenever the pair is, so the pair's own look can stop here."""
    if waiter is None or not key_limits.needs_key(waiter[1]):
        return False
    return await state(tx, key) is not None


async def views(
    tx: Tx, hold: int, found: Sequence[PairView], choices: Choices | None = None
) -> list[PairView]:
    """The pairs a waiter of ``hold`` waits in (``found``), with its keys' own lines
    when they are limited: its pair's cap there counts its burst, and the key is one
    more view (its limit, its slots held and the waiter it chose)."""
    if not key_limits.needs_key(hold):
        return list(found)
    out: list[PairView] = []
    for view in found:
        key = view.pair[0]
        chosen = await choose(tx, key, choices)
        if chosen is None:
            out.append(view)
            continue
        key_state, candidate = chosen
        cap = key_limits.pair_cap(view.limit, view.burst, key_state)
        out.append(view._replace(limit=cap))
        out.append(key_limits.key_view(key, key_state, candidate))
    return out


def passes(choices: Choices) -> dict[Pair, float]:
    """The stored pass of each value the keys chose (``choose``), as their walks read
    it under the keys' locks: serving it (``serve``) need not read it again."""
    return {
        (key, found[1].ivalue): found[1].share
        for key, found in choices.items()
        if found is not None and found[1] is not None
    }


def chosen_at(choices: Choices, waiter: Views) -> list[Pair]:
    """The pairs whose keys chose ``waiter`` (the run and hold a ``Views`` asks about):
    where it waits, known before its views are read (PostgreSQL locks them first)."""
    return [
        (key, found[1].ivalue)
        for key, found in choices.items()
        if found is not None
        and found[1] is not None
        and found[1].head == (waiter.run_id, waiter.hold)
    ]


async def serve(tx: Tx, pairs: Sequence[Pair], known: Mapping[Pair, float] | None = None) -> None:
    """A waiter promoted at ``pairs`` took a slot of each limited key among them:
    its value's share moves on (``key_limits.served``). ``known``: passes already
    read in this transaction (``passes``)."""
    for key, value in pairs:
        if key_limits.is_key_pair((key, value)):
            continue
        if key_limits.key_pair(key) not in pairs:
            continue
        found = await state(tx, key)
        if found is None:
            continue
        if known is not None and (key, value) in known:
            share = known[key, value]
        else:
            share = await tx.rows.key_share(key, value)
        share, vtime = key_limits.served(found, value, share)
        await tx.rows.put_key_share(key, value, share, vtime)


def lines(freed: Iterable[Pair]) -> list[Pair]:
    """``freed`` with the own lines of their keys: a slot freed at a pair frees one of
    its key too (when the key is limited), whose line then admits its choice."""
    out = set(freed)
    out |= {key_limits.key_pair(key) for key, _ in out}
    return sorted(out)
