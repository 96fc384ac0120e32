"""How the worker rides out a world in trouble: backoff, log manners, fatal errors.

A world error that may heal by waiting (``WorldUnavailableError``: a restarted
database, a lock held too long) is retried with exponential backoff and
jitter, capped. One that cannot (``WorldMisconfiguredError``: read-only,
schema newer than this code, authentication failed, database missing) stops
the worker. Anything else is a bug or a bad value, retried a bounded number
of times (``POISON_LIMIT``) before the work it belongs to is failed.

Each failure logs one line; the traceback of a kind of failure is logged the
first time only, so a ten-second outage gives a handful of lines, not forty
tracebacks.
"""

from __future__ import annotations

import logging
import random

from worlds.errors import WorldMisconfiguredError, WorldUnavailableError, as_world_error

__all__ = ["POISON_LIMIT", "Backoff", "Complaints", "is_fatal", "is_transient"]

POISON_LIMIT = 3
"""Attempts at committing a workflow task or a step outcome that fails with a
non-world error (the same way every time) before the run is failed instead."""


class Backoff:
    """Exponential delays with jitter: ``first``, ``2 * first``, ... up to ``cap``."""

    def __init__(self, first: float = 0.05, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.failures = 0

    def next(self) -> float:
        """The next delay in seconds (between half and all of the exponential step)."""
        step = min(self.cap, self.first * 2.0**self.failures)
        self.failures += 1
        return step * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        """Start again from ``first`` (after a success)."""
        self.failures = 0


def is_transient(exc: BaseException) -> bool:
    """Whether waiting may heal ``exc`` (a world that is unavailable for now)."""
    return isinstance(as_world_error(exc), WorldUnavailableError)


def is_fatal(exc: BaseException) -> WorldMisconfiguredError | None:
    """The world error that waiting cannot heal, if ``exc`` is one."""
    error = as_world_error(exc)
    return error if isinstance(error, WorldMisconfiguredError) else None


class Complaints:
    """Logs failures in one line each, with a traceback the first time per kind."""

    def __init__(self, log: logging.Logger, worker_id: str) -> None:
        self._log = log
        self._worker_id = worker_id
        self._seen: set[tuple[str, type[BaseException]]] = set()

    def failed(self, doing: str, exc: BaseException, retry_in: float | None) -> None:
        """Log that ``doing`` failed with ``exc``; ``retry_in`` seconds until the next try."""
        error = as_world_error(exc) or exc
        then = "giving up" if retry_in is None else f"retrying in {retry_in:.2f} s"
        first = (doing, type(exc)) not in self._seen
        self._seen.add((doing, type(exc)))
        self._log.warning(
            "worker %s could not %s: %s: %s; %s",
            self._worker_id,
            doing,
            type(error).__name__,
            _one_line(error),
            then,
            exc_info=exc if first else None,
        )


def _one_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return "(unprintable error)"
    return " ".join(text.split())
