"""Slot history: the minute a change of a limited pair is sampled in, and how long
samples are kept.

A world samples a pair in the transaction that changes its rows (a start, a
``hold()``, a release, a promotion): one row per (key, value, minute) holding
the holders and waiters as the minute left them and the most of each it saw.
So the history costs one upsert per changed pair per transaction, nothing
while nothing changes, and reading a window is a range of one index. Pruning
keeps each pair's newest sample whatever its age unless it shows the pair
empty: it is the level the pair has stood at since, and a chart starting
after it needs it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from worlds._rules.counts import check_window
from worlds._rules.key_limits import is_key_pair

__all__ = ["check_keep", "check_span", "cutoff", "minute_of", "sampled"]

Pair = tuple[str, str]


def minute_of(at: datetime) -> datetime:
    """The start of the UTC minute ``at`` falls in: the sample a change at ``at`` updates."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def sampled(pairs: Iterable[Pair]) -> list[Pair]:
    """The (key, value) pairs of ``pairs`` to sample, once each and sorted (so two
    transactions touch the samples in one order); a key's own line is not a pair."""
    return sorted({pair for pair in pairs if not is_key_pair(pair)})


def check_span(since: datetime, until: datetime, width: int) -> int:
    """The number of buckets of a history window, or the error ``check_window`` raises
    (``TypeError``, ``ValueError``); also ``ValueError`` unless ``width`` is whole minutes
    (a sample is one minute's)."""
    buckets = check_window(since, until, width)
    if width % 60:
        raise ValueError(f"width must be a whole number of minutes in seconds, got {width}")
    return buckets


def check_keep(keep: float) -> None:
    """Raise ``ValueError`` for a negative (or not finite) keep window."""
    if not keep >= 0 or keep == float("inf"):
        raise ValueError(f"keep must be a finite number of seconds >= 0, got {keep!r}")


def cutoff(now: datetime, keep: float) -> datetime:
    """Samples whose minute began before this may go (the pair's newest non-empty one
    stays). Not rounded to a minute: ``keep=0`` lets every past sample go."""
    check_keep(keep)
    return now - timedelta(seconds=keep)
