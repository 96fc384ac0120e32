"""Rate-limited pairs' tokens: a new run's start time, and ``rate_limit`` in workflows.

``worlds._rules.rates`` decides (``start_time``, ``next_token``); this module
reads the pairs' newest tokens, asks, and writes the token. A pair's tokens
are read and written under its lock (``Rows.rate_tokens`` takes it), so two
transactions never hand out the same place in a window.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from worlds._flows.rows import Pair, Rows
from worlds._flows.tx import Tx
from worlds._rules import rates
from worlds.semantics import index_value, workflow_item_id
from worlds.types import (
    AttributeValue,
    ClaimConflict,
    CreateRunRequest,
    RateTokenRequested,
    RunCreated,
)

__all__ = ["acquire", "admit", "move_token", "retime", "take", "window"]


async def window(
    rows: Rows,
    pair: Pair,
    limit: int,
    per: float,
    not_before: datetime | None = None,
    without: str | None = None,
) -> rates.Window:
    """What ``rates.next_token`` reads of ``pair`` (its lapsed tokens dropped), the
    tokens of run ``without`` left out."""
    span = timedelta(seconds=per)
    since = max(rows.now, not_before or rows.now) - span
    extra = 0 if without is None else 1
    newest = await rows.rate_tokens(pair, rows.now - span, limit + extra)
    count = rates.early_count(limit) + extra
    early = await rows.tokens_after(pair, since, count)
    complete = len(early) < count
    if without is not None:
        newest = [t for t in newest if t.run_id != without][:limit]
        early = [t for t in early if t.run_id != without]
    return rates.Window(newest, early, complete)


async def _tokens(
    tx: Tx, key: str, value: AttributeValue, limit: int, per: float, not_before: datetime | None
) -> tuple[Pair, rates.Window]:
    pair = (key, index_value(value))
    return pair, await window(tx.rows, pair, limit, per, not_before)


async def admit(tx: Tx, request: CreateRunRequest) -> datetime | ClaimConflict | None:
    """When the new run of ``request`` starts at its rate-limited pairs
    (``rates.start_time``), the conflict of a full ``on_full="fail"`` pair, or
    ``None`` when it has none. Raises ``ValueError`` for a pair held at another rate."""
    if not request.rates:
        return None
    tokens = {}
    for key in sorted(request.rates):
        rate = request.rates[key]
        value = request.attributes[key]
        _, tokens[key] = await _tokens(tx, key, value, rate.limit, rate.per, request.start_at)
    at = rates.start_time(request, tokens, tx.rows.now)
    if isinstance(at, ClaimConflict) or len(request.rates) != 1 or at <= tx.rows.now:
        return at
    return await _pass(tx, request, at)


async def _pass(tx: Tx, request: CreateRunRequest, at: datetime) -> datetime:
    """The place the new run of ``request`` takes ahead of the waiting runs of its
    one rate-limited pair with a higher priority number (``rates.by_priority``),
    those runs moved back a place each; its place."""
    rows = tx.rows
    ((key, rate),) = request.rates.items()
    pair = (key, index_value(request.attributes[key]))
    reserved = [
        r
        for r in await rows.reserved_tokens(pair, rows.now, request.priority)
        if await _movable(rows, r.run_id)
    ]
    mine, moves = rates.by_priority(at, request.priority, reserved, request.start_at)
    for passed, place in moves:
        await move_token(rows, pair, passed.run_id, place, rate.limit, rate.per, passed.priority)
    return mine


async def _movable(rows: Rows, run_id: str) -> bool:
    """Whether waiting run ``run_id`` may be moved back: no worker has its item, and
    its one token is at this pair."""
    item = await rows.get_work(run_id, workflow_item_id(run_id))
    if item is None or item.ever_leased:
        return False
    return len(await rows.run_tokens(run_id)) == 1


async def move_token(
    rows: Rows, pair: Pair, run_id: str, at: datetime, limit: int, per: float, priority: int
) -> None:
    """Run ``run_id``'s start-time token at ``pair`` moves to ``at``, its workflow item
    with it, and its ``RunCreated`` records the new start."""
    await rows.drop_token(pair, run_id, 0)
    await rows.insert_token(pair, 0, rates.Token(at, run_id, limit, per), priority)
    await retime(rows, run_id, at, admitted=True)


async def retime(rows: Rows, run_id: str, at: datetime, *, admitted: bool) -> None:
    """Pending run ``run_id``'s workflow item is due at ``at``, and its ``RunCreated``
    records the start for people; ``admitted``: its tokens moved there, so it is
    admitted then (``RunRecord.admitted_at``, the time its ``RunStarted`` records)."""
    await rows.set_available(run_id, workflow_item_id(run_id), at)
    if admitted:
        await rows.set_admitted(run_id, at)
    created = (await rows.events(run_id))[0]
    assert isinstance(created, RunCreated), "a run's log starts with RunCreated"
    start_at = at if at > rows.now else None
    await rows.rewrite_created(run_id, msgspec.structs.replace(created, start_at=start_at))


async def take(tx: Tx, request: CreateRunRequest, at: datetime) -> None:
    """The new run's token at each of its rate-limited pairs, at ``at``."""
    for key, rate in sorted(request.rates.items()):
        pair = (key, index_value(request.attributes[key]))
        limit, per, priority = rate.limit, rate.per, request.priority
        token = rates.Token(at, request.run_id, limit, per)
        await tx.rows.insert_token(pair, 0, token, priority)


async def acquire(tx: Tx, run_id: str, event: RateTokenRequested) -> RateTokenRequested:
    """A ``rate_limit`` call's token (``rates.next_token``), its time in ``token_at``; no
    token, and the event ``refused``, when the pair is held at another rate."""
    pair, tokens = await _tokens(tx, event.key, event.value, event.limit, event.per, None)
    try:
        at, _ = rates.next_token(
            event.key, event.value, tokens, event.limit, event.per, tx.rows.now
        )
    except ValueError as refused:
        return msgspec.structs.replace(event, refused=str(refused))
    await tx.rows.insert_token(pair, event.number, rates.Token(at, run_id, event.limit, event.per))
    return msgspec.structs.replace(event, token_at=at)
