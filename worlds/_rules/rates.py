"""Rate limits: at most ``limit`` starts of a (key, value) pair per sliding window.

Every start of a rate-limited pair (a run created with ``CreateRunRequest.rates``,
or a ``rate_limit`` call in workflow code, ``RateTokenRequested``) takes a
*token* stamped with the time it may start. The next token goes at the
earliest time, from ``max(now, not_before)`` on, at which every window
``(s, s + per]`` holding it holds fewer than ``limit`` other tokens
(``next_token``): in a queue that is right after the newest tokens,

    ``max(now, the newest token, the limit-th newest token + per)``,

so tokens are handed out in arrival order; a delayed start's token, reserved in
the future, leaves the places before it to the starts that come now. Every
token is placed where it keeps every window within the limit, so no window ever
holds more (the property test in ``tests/worlds/test_rates.py`` checks every
window of random sequences of starts). A token in the future
is a reservation: the run (or the workflow) waits, holding no worker, until
then; nothing needs promoting, since the time is known when the token is taken.

A run with several rate-limited pairs takes one token of each at the same
time, the latest of their ``next_token``s (any later time keeps the rule too).
``on_full="fail"`` refuses a start whose token would lie in the future, and
``retry_after`` says when one would not (absent other starts meanwhile: the
rule at that time answers that time).

A pair has one rate at a time (like a limited pair's one limit): while its
newest token is inside its own window, a start asking another ``limit`` or
``per`` is refused with ``ValueError``; once it lapsed, any rate starts afresh.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from worlds.types import AttributeValue, ClaimConflict, CreateRunRequest

__all__ = [
    "MAX_LIMIT",
    "MAX_PER",
    "Reserved",
    "Token",
    "Window",
    "by_priority",
    "check_rate",
    "check_rates",
    "early_count",
    "live",
    "next_token",
    "start_time",
]

MAX_LIMIT = 1_000_000
MAX_PER = 100 * 365 * 86_400.0
"""100 years, the bound of every span the API takes (``workflow._spans``)."""


class Token(NamedTuple):
    """A token a pair handed out: when it starts, whose it is, and the rate it was
    taken under (``limit`` per ``per`` seconds)."""

    at: datetime
    run_id: str
    limit: int
    per: float


def check_rate(what: str, limit: object, per: object) -> None:
    """Raise ``TypeError``/``ValueError`` for a rate no world can keep."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"the limit of {what} is an int, not {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"the limit of {what} must be 1-{MAX_LIMIT}, got {limit}")
    if isinstance(per, bool) or not isinstance(per, int | float):
        raise TypeError(f"per of {what} is seconds, not {type(per).__name__}")
    if math.isnan(per) or not 0 < per <= MAX_PER:
        raise ValueError(f"per of {what} must be > 0 seconds and at most 100 years, got {per}")


def check_rates(request: CreateRunRequest) -> None:
    """Raise ``ValueError`` when ``request.rates`` contradicts the rest of the request."""
    for key, rate in request.rates.items():
        if key not in request.attributes:
            raise ValueError(
                f"rate-limited key {key!r} is not among the run's attributes; give it a value"
            )
        if key in request.unique or key in request.limits:
            raise ValueError(
                f"key {key!r} cannot be rate limited and also unique or Limited; "
                "put the rate limit on another key"
            )
        check_rate(repr(key), rate.limit, rate.per)
        if rate.on_full not in ("queue", "fail"):
            raise ValueError(f"on_full of {key!r} must be 'queue' or 'fail', got {rate.on_full!r}")
    if request.rates and request.limits:
        raise ValueError(
            "a run takes Limited and RateLimited values together not yet: hold the slot "
            "with hold() in the workflow, or take the token with rate_limit() there"
        )
    if request.rates and request.debounce is not None:
        raise ValueError("a debounced start takes no RateLimited value yet")


def live(tokens: Sequence[Token], now: datetime) -> bool:
    """Whether the newest of ``tokens`` (newest first) is inside its own window."""
    return bool(tokens) and tokens[0].at > now - timedelta(seconds=tokens[0].per)


def _clash(key: str, value: AttributeValue, newest: Token, limit: int, per: float) -> str:
    return (
        f"{key}={value!r} is rate limited to {newest.limit} per {newest.per:g} s by its "
        f"recent starts (run {newest.run_id}), but {limit} per {per:g} s was asked: a pair "
        "has one rate at a time; ask the same, or use another value"
    )


class Window(NamedTuple):
    """What a pair's rule reads of its tokens: the ``limit`` newest (newest first),
    and the earliest of those after ``since`` (oldest first), ``complete`` when
    that is all of them."""

    newest: Sequence[Token]
    early: Sequence[Token]
    complete: bool


def early_count(limit: int) -> int:
    """How many of a pair's earliest tokens a start reads to find a free place among
    them (past those, it takes the place after the newest)."""
    return 4 * limit + 4


def next_token(
    key: str,
    value: AttributeValue,
    window: Window,
    limit: int,
    per: float,
    now: datetime,
    not_before: datetime | None = None,
) -> tuple[datetime, str | None]:
    """The time of the pair's next token and the run whose token decided it (``None``:
    nobody, the token is due now or at ``not_before``).

    ``window.early`` are the tokens after ``not_before - per`` (or ``now - per``).
    The token goes at the earliest time, from ``max(now, not_before)`` on, whose
    every window keeps fewer than ``limit`` other tokens: a free place among
    ``window.early`` (a delayed start's token, in the future, does not hold back
    the starts before it), else right after the newest. Raises ``ValueError``
    when the pair is held at another rate.
    """
    tokens = window.newest
    if live(tokens, now) and (tokens[0].limit, tokens[0].per) != (limit, per):
        raise ValueError(_clash(key, value, tokens[0], limit, per))
    early: Sequence[Token] = window.early
    if tokens and (tokens[0].limit, tokens[0].per) != (limit, per):
        tokens, early = (), ()  # the old rate's tokens lapsed: the pair starts afresh
    at, by = now, None
    if not_before is not None and not_before > at:
        at = not_before
    earliest = at
    if tokens and tokens[0].at > at:
        at, by = tokens[0].at, tokens[0].run_id
    if len(tokens) >= limit:
        bound = tokens[limit - 1].at + timedelta(seconds=per)
        if bound > at:
            at, by = bound, tokens[limit - 1].run_id
    gap = _free_place(early, window.complete or not early, limit, per, earliest)
    if gap is not None and gap[0] < at:
        return gap
    return at, by


def _free_place(
    early: Sequence[Token], complete: bool, limit: int, per: float, earliest: datetime
) -> tuple[datetime, str | None] | None:
    """The earliest time from ``earliest`` on where a token fits among ``early``
    (checked only where every token within ``per`` of it was read), and whose
    token bounds it; ``None`` if none fits there."""
    span = timedelta(seconds=per)
    horizon = None if complete else early[-1].at
    times = sorted(token.at for token in early)
    candidates = sorted(
        [(earliest, "")] + [(t.at + span, t.run_id) for t in early if t.at + span > earliest]
    )
    for moment, by in candidates:
        if horizon is not None and moment + span >= horizon:
            return None  # tokens past the horizon were not read
        near = [t for t in times if moment - span < t < moment + span]
        if all(
            max(near[i + limit - 1], moment) - min(near[i], moment) >= span
            for i in range(len(near) - limit + 1)
        ):
            return moment, by or None
    return None


class Reserved(NamedTuple):
    """A start-time token in the future (its run waits for it) and its run's priority."""

    at: datetime
    run_id: str
    priority: int


def by_priority(
    at: datetime, priority: int, reserved: Sequence[Reserved], not_before: datetime | None
) -> tuple[datetime, list[tuple[Reserved, datetime]]]:
    """Where a start of ``priority`` whose place is ``at`` goes among ``reserved``
    (the pair's waiting runs with a higher number, oldest token first), and where
    each of those it passes goes.

    It takes the earliest of their places from ``not_before`` on and before
    ``at``; each passed run takes the next one's place, the last ``at``. The
    places stay the same set (plus ``at``, which the rule chose), so every
    window keeps its limit; lower numbers go first, and runs of one number keep
    their order.
    """
    passed = [
        r
        for r in reserved
        if r.priority > priority and r.at < at and (not_before is None or r.at >= not_before)
    ]
    if not passed:
        return at, []
    places = [r.at for r in passed[1:]] + [at]
    return passed[0].at, list(zip(passed, places, strict=True))


def start_time(
    request: CreateRunRequest, tokens: Mapping[str, Window], now: datetime
) -> datetime | ClaimConflict:
    """When the new run of ``request`` starts at its rate-limited pairs (``tokens``
    by key): the time of its token at each; or the conflict of a full
    ``on_full="fail"`` pair (``retry_after`` set).

    Raises ``ValueError`` when a pair is held at another rate.
    """
    earliest = now
    if request.start_at is not None and request.start_at > now:
        earliest = request.start_at
    at = earliest
    refusal: ClaimConflict | None = None
    for key in sorted(request.rates):
        rate, value = request.rates[key], request.attributes[key]
        due, by = next_token(key, value, tokens[key], rate.limit, rate.per, now, request.start_at)
        if rate.on_full == "fail" and due > earliest:
            wait = (due - earliest).total_seconds()
            if refusal is None or wait > (refusal.retry_after or 0.0):
                refusal = ClaimConflict(
                    key=key,
                    value=value,
                    holder_run_id=by or "",
                    limit=rate.limit,
                    retry_after=wait,
                )
        at = max(at, due)
    return at if refusal is None else refusal
