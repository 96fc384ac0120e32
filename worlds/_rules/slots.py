"""Concurrency slots: how many open runs may hold a limited (key, value) pair.

A start with ``CreateRunRequest.limits`` meets each of its limited pairs in
some state (``PairState``). ``admit`` decides: take a slot of every pair at
once, wait in every pair, or refuse. A waiting run holds nothing: no slot, no
work item, so no worker. When a run closes, its rows go and the pairs they
were in are handed to ``promote_flow``, which promotes waiters lowest
priority number first, first in first out within a number: the first waiter
of a pair is promoted once every pair it waits in has a free slot and it is
the first waiter there too; a waiter that cannot be
promoted blocks the ones behind it in that pair only, so a full pair never
delays another pair's runs. Every promotion takes slots and frees none, so a
pair's holders never exceed its limit (one limit per pair: ``check_pair_limit``).

Workflow code takes slots too (``workflow.hold``): a ``SlotRequested``
command gets a row for (run, hold number) at its one pair, decided by
``admit_hold`` (the same rule: a slot if one is free and nobody waits, else a
place in line); ``SlotReleased`` or the run's close drops it. A waiter is
therefore a (run id, hold number) ``Waiter``: hold 0 is a start-time row
(promotion gives the run its workflow item), any other a ``hold`` inside a
running workflow (promotion appends ``SlotAcquired`` to its log and wakes it).

A pair has one limit at a time (``check_pair_limit``): an entrant asking
another limit than the pair's rows is refused. A reopened or forked run takes
its slots again (``retake``): all at once, or it waits in line under the hold
number ``REOPENING``, holding none, until promoted.

``promote_flow`` is a generator a backend drives, answering each ``Need``
with the rows it reads (``Head``, ``Views``) or the write it does
(``Promote``); see ``commits.drive`` for the synchronous driver pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from worlds.types import (
    AttributeValue,
    ClaimConflict,
    CreateRunRequest,
    EventKind,
    RunCreated,
    RunRecord,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
)

__all__ = [
    "REOPENING",
    "Head",
    "Need",
    "PairState",
    "PairView",
    "Promote",
    "Retake",
    "SlotNeed",
    "Views",
    "Waiter",
    "admit",
    "admit_hold",
    "check_hold",
    "check_limits",
    "check_pair_limit",
    "drive",
    "enters_again",
    "hold_refused",
    "limit_clash",
    "promote_flow",
    "retake",
    "waits_to_go_on",
]

Pair = tuple[str, str]
"""A limited pair as worlds index it: (key, ``index_value(value)``)."""

Waiter = tuple[str, int]
"""A row in line: (run id, hold number); hold 0 is a run waiting to start."""


class PairState(NamedTuple):
    """A limited pair as ``create_run`` finds it (under the pair's lock)."""

    holding: int
    waiting: int
    someone: str | None
    """A holder (else a waiter) to name when the pair refuses a start."""
    limit: int | None = None
    """The limit the pair's rows ask (a holder's, else a waiter's); None: no rows."""


def check_pair_limit(key: str, value: AttributeValue, state: PairState, limit: int) -> None:
    """Raise ``ValueError`` when ``limit`` is not the limit the pair is held with.

    A pair has one limit at a time, fixed by the rows it has (its holders, else
    its waiters): an entrant asking another one is refused rather than letting
    each entrant's own limit decide (a ``limit=2`` run would enter a block whose
    ``limit=1`` holder counts on being alone). Once the pair is empty, any limit
    may start it afresh.
    """
    if state.limit is not None and state.limit != limit:
        raise ValueError(limit_clash(key, value, state.limit, state.someone, limit))


def limit_clash(
    key: str, value: AttributeValue, pair_limit: int, someone: str | None, limit: int
) -> str:
    """The message refusing an entrant that asks ``limit`` of a pair held with ``pair_limit``."""
    by = f" (run {someone})" if someone else ""
    return (
        f"{key}={value!r} is limited to {pair_limit} by the runs holding it{by}, but "
        f"{limit} was asked: a pair has one limit at a time; ask {pair_limit}, or use "
        "another value"
    )


def check_limits(request: CreateRunRequest) -> None:
    """Raise ``ValueError`` when ``request.limits`` contradicts the rest of the request."""
    for key, limit in request.limits.items():
        if key not in request.attributes:
            raise ValueError(
                f"limited key {key!r} is not among the run's attributes; give it a value"
            )
        if key in request.unique:
            raise ValueError(
                f"key {key!r} cannot be both unique and limited; Unique(v) is Limited(v, 1) "
                "that also outlives its holder: choose one"
            )
        if not 1 <= limit.limit <= 1_000_000:
            raise ValueError(f"limit of {key!r} must be 1-1000000, got {limit.limit}")
        if limit.on_full not in ("queue", "fail"):
            raise ValueError(f"on_full of {key!r} must be 'queue' or 'fail', got {limit.on_full!r}")
        if not 0 <= limit.burst <= 1_000_000:
            raise ValueError(f"burst of {key!r} must be 0-1000000, got {limit.burst}")


def admit(
    request: CreateRunRequest,
    states: dict[str, PairState],
    caps: Mapping[str, int] | None = None,
    key_refusals: Mapping[str, ClaimConflict] | None = None,
) -> Literal["hold", "wait"] | ClaimConflict:
    """What a new run does at its limited pairs (``states`` by key).

    Raises ``ValueError`` (``check_pair_limit``) when a pair is held with
    another limit than the one asked.

    A pair is full when its slots are all held or runs wait there already
    (first in, first out: a newcomer never passes a waiter). A full
    ``on_full="fail"`` pair refuses the start; else a full pair makes the run
    wait in all its pairs; else it holds a slot of each. ``caps`` (by key) is how
    many slots a pair may hold when that is not its limit: its burst under a key
    limit with room (``key_limits.pair_cap``).

    The refusal names a holder of the pair when its slots are all held. A pair
    with room is full only by its line, and its waiters wait because their key
    is full: the refusal is the key's then (``key_refusals``, by key, from
    ``key_limits.refusal``), naming a holder of the key, never a waiter. Only a
    line with neither (its waiters wait for another pair of theirs) is named by
    its first waiter, the run ahead of the newcomer.
    """
    full = False
    refusal: ClaimConflict | None = None
    for key in sorted(request.limits):
        limit, state = request.limits[key], states[key]
        check_pair_limit(key, request.attributes[key], state, limit.limit)
        cap = limit.limit if caps is None else caps.get(key, limit.limit)
        if state.holding < cap and state.waiting == 0:
            continue
        if limit.on_full == "fail":
            value: AttributeValue = request.attributes[key]
            pair_refusal = ClaimConflict(
                key=key, value=value, holder_run_id=state.someone or "", limit=limit.limit
            )
            if state.holding >= cap:
                return pair_refusal
            if refusal is None:
                refusal = (key_refusals or {}).get(key, pair_refusal)
        full = True
    if refusal is not None:
        return refusal
    return "wait" if full else "hold"


def check_hold(key: str, limit: int) -> None:
    """Raise ``ValueError`` for a ``hold`` whose key or limit no world can keep."""
    if not key:
        raise ValueError("hold() needs a non-empty key")
    if not 1 <= limit <= 1_000_000:
        raise ValueError(f"limit of hold({key!r}) must be 1-1000000, got {limit}")


def hold_refused(state: PairState, limit: int) -> int | None:
    """The pair's limit when a ``hold`` asking ``limit`` is refused (``check_pair_limit``)."""
    return state.limit if state.limit is not None and state.limit != limit else None


def admit_hold(state: PairState, limit: int) -> bool:
    """Whether a ``hold`` takes its slot at once (else it waits in line).

    The start-time rule for one pair: a slot is free and nobody waits (a
    newcomer never passes a waiter).
    """
    return state.holding < limit and state.waiting == 0


class PairView(NamedTuple):
    """One pair a waiting run waits in: its limit there, the slots held, the first waiter."""

    pair: Pair
    limit: int
    holding: int
    first_waiter: Waiter
    burst: int = 0
    """The burst the waiter asked (``Limit.burst``): slots above ``limit`` its pair may
    take while the pair's key limit has room (``key_limits``)."""


class Head(NamedTuple):
    """Ask: the first waiter of ``pair`` (reply: its ``Waiter``, or ``None``)."""

    pair: Pair


class Views(NamedTuple):
    """Ask: a ``PairView`` of every pair waiter (``run_id``, ``hold``) waits in (reply: a list)."""

    run_id: str
    hold: int = 0


class Promote(NamedTuple):
    """Do: waiter (``run_id``, ``hold``) takes a slot in each of ``pairs``.

    Hold 0: the run gets its workflow work item. Else: ``SlotAcquired(hold)``
    is appended to the run's log and its workflow is woken.
    """

    run_id: str
    pairs: tuple[Pair, ...]
    hold: int = 0


Need = Head | Views | Promote


def promote_flow(freed: Iterable[Pair]) -> Generator[Need, Any, list[str]]:
    """Promote what the pairs ``freed`` (slots or waiters gone) now admit.

    Returns the promoted run ids in promotion order. A promotion may unblock
    another pair (its promoted head was blocking the runs behind it there),
    so that pair is looked at too.
    """
    todo = sorted(set(freed))
    promoted: list[str] = []
    while todo:
        pair = todo.pop(0)
        while True:
            head: Waiter | None = yield Head(pair)
            if head is None:
                break
            run_id, hold = head
            views: list[PairView] = yield Views(run_id, hold)
            if not all(v.holding < v.limit and tuple(v.first_waiter) == head for v in views):
                break
            yield Promote(run_id, tuple(sorted(v.pair for v in views)), hold)
            promoted.append(run_id)
            todo.extend(v.pair for v in views if v.pair != pair and v.pair not in todo)
    return promoted


def drive(flow: Generator[Need, Any, list[str]], do: Callable[[Need], object]) -> list[str]:
    """Run ``flow`` to its end synchronously, answering each need with ``do(need)``."""
    reply: object = None
    while True:
        try:
            need = flow.send(reply)
        except StopIteration as stop:
            promoted: list[str] = stop.value
            return promoted
        reply = do(need)


REOPENING = -1
"""The hold number of the rows a reopened or forked run waits in until it may
take its slots again (one row per pair); promoting it gives the run its rows
back (``Retake``) and its work."""


class SlotNeed(NamedTuple):
    """A slot a reopened or forked run needs: ``hold`` 0 for a ``Limited`` start
    attribute, else the number of its ``hold()`` block."""

    key: str
    value: AttributeValue
    limit: int
    hold: int
    priority: int = 0
    burst: int = 0


class Retake(NamedTuple):
    """What a reopened or forked run takes again before its body runs on."""

    held: tuple[SlotNeed, ...]
    """The slots it held: its ``Limited`` start pairs and the ``hold()`` blocks it
    was inside. It takes all of them at once, or waits (``REOPENING``) holding none."""
    waiting: tuple[SlotNeed, ...]
    """The ``hold()`` blocks that were waiting in line: in line again, at the end."""


def retake(log: Sequence[EventKind]) -> Retake:
    """The slots a run with the replayed ``log`` (``reopen.effective_log``, the
    reopening or fork included) needs again: closing dropped its rows, yet its
    body goes on as if it held them.

    A block counts while its ``SlotReleased`` is not in the log (the reopening
    passes over a release the failure's unwinding recorded, since the body
    runs that part anew).
    """
    first = log[0] if log else None
    held: list[SlotNeed] = []
    if isinstance(first, RunCreated):
        held += [
            SlotNeed(key, first.attributes[key], limit, 0, first.priority)
            for key, limit in sorted(first.limits.items())
            if key in first.attributes
        ]
    requested: dict[int, SlotRequested] = {}
    acquired: set[int] = set()
    for event in log:
        if isinstance(event, SlotRequested) and event.refused is None:
            requested[event.hold] = event
            if event.acquired:
                acquired.add(event.hold)
        elif isinstance(event, SlotAcquired):
            acquired.add(event.hold)
        elif isinstance(event, SlotReleased):
            requested.pop(event.hold, None)
    waiting: list[SlotNeed] = []
    for number, event in sorted(requested.items()):
        need = SlotNeed(event.key, event.value, event.limit, number, event.priority)
        (held if number in acquired else waiting).append(need)
    return Retake(tuple(held), tuple(waiting))


def waits_to_go_on(run: RunRecord) -> bool:
    """Whether ``run`` is a reopened or forked run waiting in line for its slots
    (``REOPENING``): pending although it ran before. Nothing wakes it then (a
    hook's payload waits in its log); its promotion gives it its work."""
    return run.status is RunStatus.PENDING and run.started_at is not None


def enters_again(needs: Sequence[SlotNeed], states: Sequence[PairState]) -> bool:
    """Whether a reopened or forked run takes the slots ``needs`` (their pairs in
    ``states``) now: every one has a free slot and nobody waiting, as at start.

    Raises ``ValueError`` (``check_pair_limit``) when a pair is held with another limit.
    """
    for need, state in zip(needs, states, strict=True):
        check_pair_limit(need.key, need.value, state, need.limit)
    return all(admit_hold(state, need.limit) for need, state in zip(needs, states, strict=True))
