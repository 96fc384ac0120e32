"""Key limits: a cap on all open runs that hold a slot of any value of one key.

``World.set_key_limit(key, limit, weights)`` stores a cap over the ``Limited``
(start-time) slots of every value of ``key``: a run then needs a slot of its
pair **and** one of the key. The key has a line of its own, the pair
``key_pair(key)`` (``KEY_VALUE`` is no attribute value's index text), so the
slots' ``promote_flow`` promotes through it like through any pair: its
``Head`` is the waiter ``pick`` chooses, and every waiter that needs a key
slot sees the key among its ``PairView`` s (``key_view``), so it is promoted
only when the key has a free slot and it is the key's choice.

**Fair shares.** When key slots free, the values with runs waiting are served
weighted round-robin by stride scheduling: each value has a stored ``share``
(its pass); the candidate with the smallest pass goes first, and serving it
moves its pass on by ``1 / weight`` from ``max(share, vtime)`` (``served``;
``vtime``: the key's virtual time, the pass of the last value served). A
value with 10,000 waiting runs and a value with one therefore alternate, and
a weight-2 value is served twice as often as a weight-1 value while both
wait. A value that was idle enters the key's line at ``max(share, vtime)``
(``entry``): it does not hoard credit for the time it waited for nothing.

**The line.** The values waiting are kept in the key's line, ordered by
(pass, value): a store indexes it, so the key's next value is read from its
head (``decided`` says when a prefix of the line is enough) instead of every
value waiting being read at each promotion. Equal passes go by value index
text, not by the first waiters' priorities: priority orders a value's own
runs; across values, the shares decide.

**Burst.** ``Limited(value, limit, burst=m)`` lets its pair hold up to
``limit + m`` slots while the key has free capacity (``pair_cap``); ``pick``
serves every value still under its own ``limit`` before one that would use a
burst slot, so a burst takes capacity nobody else waits for. Without a key
limit there is no shared capacity and a pair holds at most ``limit``.

Only start-time rows (hold 0) and reopened runs waiting for them
(``slots.REOPENING``) take key slots (``needs_key``): a ``hold()`` inside a
run that already holds a key slot must not wait for a second one of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from worlds._rules.slots import REOPENING, PairView, Waiter
from worlds._rules.terms import index_value
from worlds.types import AttributeValue, ClaimConflict, CreateRunRequest, KeyLimit

__all__ = [
    "KEY_VALUE",
    "Candidate",
    "KeyState",
    "admit",
    "check_key_limit",
    "decided",
    "entry",
    "full",
    "is_key_pair",
    "key_pair",
    "key_view",
    "needs_key",
    "pair_cap",
    "pick",
    "refusal",
    "served",
    "waits_behind",
    "weight_of",
]

Pair = tuple[str, str]

KEY_VALUE = "*"
"""The ``ivalue`` of a key's own line: every value's index text has a type prefix
(``s:``, ``i:``, ...), so no attribute value is indexed as ``*``."""

MAX_LIMIT = 1_000_000


def key_pair(key: str) -> Pair:
    """The pair that stands for ``key``'s own line in ``promote_flow``."""
    return (key, KEY_VALUE)


def is_key_pair(pair: Pair) -> bool:
    """Whether ``pair`` is a key's own line (``key_pair``), not a (key, value) pair."""
    return pair[1] == KEY_VALUE


def needs_key(hold: int) -> bool:
    """Whether a row of hold number ``hold`` takes a key slot: start-time slots
    (0) and reopened runs waiting for theirs (``REOPENING``), not ``hold()`` blocks."""
    return hold in (0, REOPENING)


class KeyState(NamedTuple):
    """A limited key as the flows read it (under the key's lock)."""

    limit: int
    holding: int
    """Start-time slots held at the key, over all its values."""
    vtime: float
    """The pass of the value served last: where an idle value starts again."""
    weights: Mapping[str, float]
    """Weight by value index text (``index_value``); 1 when absent."""
    holder: str | None = None
    """A run holding a key slot, to name when the key refuses a start."""


class Candidate(NamedTuple):
    """A value of a limited key with runs in line: its first waiter and its pair."""

    ivalue: str
    head: Waiter
    limit: int
    """The limit the first waiter asked of its pair."""
    burst: int
    """The burst the first waiter asked."""
    holding: int
    """Slots held at the pair."""
    priority: int
    position: int
    share: float
    """The value's stored pass (0 when it was never served)."""


def check_key_limit(
    key: str, limit: int | None, weights: Mapping[Any, float] | None
) -> KeyLimit | None:
    """The key limit to store (``None``: remove it); ``ValueError``/``TypeError`` for
    input no world keeps, before anything is written."""
    if not isinstance(key, str) or not 1 <= len(key) <= 256:
        raise ValueError(f"a key limit's key is 1-256 characters, got {key!r}")
    if key.startswith("$"):
        raise ValueError(f"keys beginning with '$' are reserved, got {key!r}")
    if limit is None:
        if weights:
            raise ValueError("weights need a limit: set_key_limit(key, None) removes the limit")
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"a key limit is an int or None, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"a key limit must be 1-{MAX_LIMIT}, got {limit}")
    pairs: list[tuple[AttributeValue, float]] = []
    for value, weight in (weights or {}).items():
        index_value(value)  # a TypeError for what is no attribute value
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise TypeError(f"the weight of {value!r} is a number, not {type(weight).__name__}")
        if not (math.isfinite(weight) and 0.001 <= weight <= MAX_LIMIT):
            raise ValueError(f"the weight of {value!r} must be 0.001-{MAX_LIMIT}, got {weight}")
        pairs.append((value, float(weight)))
    pairs.sort(key=lambda pair: index_value(pair[0]))
    return KeyLimit(key=key, limit=limit, weights=pairs)


def weight_of(weights: Sequence[tuple[AttributeValue, float]]) -> dict[str, float]:
    """A stored limit's weights by value index text, as ``KeyState.weights`` holds them."""
    return {index_value(value): weight for value, weight in weights}


def pair_cap(limit: int, burst: int, key: KeyState | None) -> int:
    """How many slots a pair asked ``limit`` (and ``burst``) may hold: ``limit``, and up
    to ``burst`` more while its key is limited and has a free slot."""
    if key is None or key.holding >= key.limit:
        return limit
    return limit + burst


def full(key: KeyState | None) -> bool:
    """Whether a limited key has no free slot (a key without a limit never is full)."""
    return key is not None and key.holding >= key.limit


def refusal(key: str, value: AttributeValue, state: KeyState) -> ClaimConflict:
    """The conflict an ``on_full="fail"`` start meets when its key is full."""
    return ClaimConflict(key=key, value=value, holder_run_id=state.holder or "", limit=state.limit)


def admit(
    request: CreateRunRequest,
    verdict: Literal["hold", "wait"] | ClaimConflict,
    keys: Mapping[str, KeyState | None],
) -> Literal["hold", "wait"] | ClaimConflict:
    """What a new run does once its pairs gave ``verdict`` (``slots.admit``): it also
    needs a slot of every limited key among them (``keys``, by key). A full key
    refuses an ``on_full="fail"`` start (naming a key holder) and makes any other
    wait, holding nothing."""
    if isinstance(verdict, ClaimConflict):
        return verdict
    waits = verdict == "wait"
    for key in sorted(request.limits):
        state = keys.get(key)
        if state is None or not full(state):
            continue
        if request.limits[key].on_full == "fail":
            return refusal(key, request.attributes[key], state)
        waits = True
    return "wait" if waits else "hold"


def waits_behind(waiting: Sequence[int], queued: Sequence[bool | None]) -> bool:
    """Whether a new run waits whatever its keys' limits say, so its start need not
    read them (nor, on PostgreSQL, wait for their locks): each of its pairs has runs
    waiting (``waiting``, counted under the pairs' locks; a newcomer never passes
    them) and each value waits in its key's line already (``queued``; ``None``: the
    key has no limit), so joining changes nothing at the key (``entry`` keeps the
    value's pass). A value with runs waiting leaves its key's line only once nobody
    waits at its pair, which nobody can make so while the pair is locked."""
    return all(n > 0 for n in waiting) and all(q is not False for q in queued)


def pick(state: KeyState, candidates: Sequence[Candidate]) -> Candidate | None:
    """The waiter the key admits next, if its pair has room: values under their own
    limit before those that would take a burst slot, then the smallest pass (weighted
    round-robin), then the value (``state`` is the key's, for callers' symmetry)."""
    room = [c for c in candidates if c.holding < c.limit + c.burst]
    if not room:
        return None

    def order(c: Candidate) -> tuple[bool, float, str]:
        return (c.holding >= c.limit, c.share, c.ivalue)

    return min(room, key=order)


def decided(candidates: Sequence[Candidate]) -> bool:
    """Whether ``candidates``, a prefix of the key's line in (pass, value) order, holds
    ``pick``'s choice over the whole line: it does once one of them is under its own
    limit (nobody later in the line goes before it)."""
    return any(c.holding < c.limit for c in candidates)


def entry(share: float, queued: bool, vtime: float, line_empty: bool) -> float | None:
    """The pass a value of a limited key takes as a run joins its line (``None``: it
    keeps its place): a value whose line was empty enters at ``max(share, vtime)``,
    a value in line already keeps its pass."""
    if line_empty:
        return max(share, vtime)
    return None if queued else share


def served(state: KeyState, ivalue: str, share: float) -> tuple[float, float]:
    """The pass of value ``ivalue`` (stored ``share``) once it was served a key slot,
    and the key's virtual time then."""
    start = max(share, state.vtime)
    return start + 1.0 / state.weights.get(ivalue, 1.0), start


def key_view(key: str, state: KeyState, chosen: Candidate | None) -> PairView:
    """The key as one more pair a waiter that needs a key slot waits in: its limit,
    the slots held and the waiter ``pick`` chose (nobody: no waiter is first)."""
    first: Waiter = chosen.head if chosen is not None else ("", REOPENING - 1)
    return PairView(key_pair(key), state.limit, state.holding, first)
