"""Counting runs over time: the window and buckets of ``World.count_runs``.

``count_runs(query, field, since, until, width)`` counts the runs matching
``query`` whose ``field`` time (``created_at`` or ``closed_at``) lies in
``[since, until)``, per status and per bucket of ``width`` whole seconds from
``since``: bucket ``n`` holds the times ``since + n * width`` (included) to
``since + (n + 1) * width`` (excluded). Whole seconds keep the bucket an
integer division in every world's SQL (times are microseconds in SQLite,
``timestamptz`` in PostgreSQL) with the same answer as ``bucket_of`` here.

A chart must stay cheap, so a window holds at most ``MAX_BUCKETS`` buckets.

Both times are indexed in every built-in world (``runs_created`` and
``runs_closed_status``, covering the status too), so a count reads the
window's index entries only; other filters of the query are tests on the
rows found.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["MAX_BUCKETS", "bucket_of", "check_window"]

MAX_BUCKETS = 10_080
"""Buckets one count may ask for: a week of minutes."""


def check_window(since: datetime, until: datetime, width: int) -> int:
    """The number of buckets of the window, or a ``ValueError`` saying what is wrong.

    Raises:
        TypeError: ``width`` is no int, or a time is naive.
        ValueError: ``until`` is not after ``since``, ``width`` is below 1, or
            the window holds more than ``MAX_BUCKETS`` buckets.
    """
    if isinstance(width, bool) or not isinstance(width, int):
        raise TypeError(f"width must be a whole number of seconds, got {width!r}")
    if since.tzinfo is None or until.tzinfo is None:
        raise TypeError("since and until must be aware datetimes (UTC)")
    if width < 1:
        raise ValueError(f"width must be at least 1 second, got {width}")
    if until <= since:
        raise ValueError(f"until ({until.isoformat()}) must be after since ({since.isoformat()})")
    buckets = -(-_micros(until - since) // (width * 1_000_000))
    if buckets > MAX_BUCKETS:
        raise ValueError(f"{buckets} buckets asked for, at most {MAX_BUCKETS}: widen the buckets")
    return buckets


def bucket_of(moment: datetime, since: datetime, width: int) -> int:
    """The bucket of ``moment`` (at or after ``since``): whole ``width``-second steps."""
    return _micros(moment - since) // (width * 1_000_000)


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
