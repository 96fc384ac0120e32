"""How long a user may ask the runtime to wait: the one bound on delays and windows.

``start(delay=)``, ``Unique(ttl=)`` and the debounce helper's ``delay`` and
``max_delay`` all take seconds or a ``timedelta`` from 0 to 100 years. Beyond
that a value is a mistake (``math.inf`` would leave a run pending forever), so
it is refused here, once, with the same words everywhere.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = ["MAX_SPAN_SECONDS", "span_seconds"]

MAX_SPAN_SECONDS = 100 * 365 * 86400
"""100 years: the longest delay, ttl or debounce window accepted."""


def span_seconds(what: str, span: object) -> float:
    """``span`` (seconds or a ``timedelta``) in seconds, if it is 0 seconds to 100 years.

    Raises:
        TypeError: ``span`` is neither a number (``bool`` excluded) nor a ``timedelta``.
        ValueError: it is negative, NaN, infinite or longer than 100 years.
    """
    if isinstance(span, bool) or not isinstance(span, int | float | timedelta):
        raise TypeError(f"{what} is seconds or a timedelta, not {type(span).__name__}")
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    if not (math.isfinite(seconds) and 0 <= seconds <= MAX_SPAN_SECONDS):
        raise ValueError(f"{what} must be 0 seconds to 100 years, got {span}")
    return seconds
