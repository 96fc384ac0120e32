"""How the worker rides out a world in trouble: backoff, log manners, fatal errors.

A world error that may heal by waiting (``WorldUnavailableError``: a restarted
database, a lock held too long) is retried with exponential backoff and
jitter, capped. One that cannot (``WorldMisconfiguredError``: read-only,
schema newer than this code, authentication failed, database missing) stops
the worker. Anything else is a bug or a bad value, retried a bounded number
of times (``POISON_LIMIT``) before the work it belongs to is failed.

An outage of the world is logged when it begins, every ten seconds while it
lasts and when it ends, however many calls fail meanwhile; any other failure
is one line each; the traceback of a kind of failure is logged the first time
only. A ten-second outage gives a handful of lines, not thousands.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

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
    """Logs a worker's failures with manners.

    While the world is unavailable (a transient world error), the worker says so
    once when the outage begins, at most once every ``remind_every`` seconds
    while it lasts, and once when the world answers again: however many calls
    fail meanwhile. Any other failure is one line each. A traceback is logged
    the first time only per kind of failure (the verb of ``doing`` and the
    exception's type).
    """

    def __init__(
        self,
        log: logging.Logger,
        worker_id: str,
        *,
        remind_every: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._worker_id = worker_id
        self._remind_every = remind_every
        self._clock = clock
        self._seen: set[tuple[str, type[BaseException]]] = set()
        self._outage_since: float | None = None
        self._reminded_at = 0.0
        self._failed_calls = 0

    def failed(self, doing: str, exc: BaseException, retry_in: float | None) -> None:
        """Log that ``doing`` failed with ``exc``; ``retry_in`` seconds until the next try."""
        error = as_world_error(exc) or exc
        kind = (doing.split(" ", 1)[0], type(exc))
        first = kind not in self._seen
        self._seen.add(kind)
        trace = exc if first else None
        if retry_in is not None and isinstance(error, WorldUnavailableError):
            self._unavailable(doing, error, trace)
            return
        then = "giving up" if retry_in is None else f"retrying in {retry_in:.2f} s"
        self._log.warning(
            "worker %s could not %s: %s: %s; %s",
            self._worker_id,
            doing,
            type(error).__name__,
            _one_line(error),
            then,
            exc_info=trace,
        )

    def _unavailable(self, doing: str, error: BaseException, trace: BaseException | None) -> None:
        now = self._clock()
        self._failed_calls += 1
        if self._outage_since is None:
            self._outage_since = self._reminded_at = now
            self._failed_calls = 1
            self._log.warning(
                "worker %s: the world is unavailable (could not %s): %s; retrying with backoff",
                self._worker_id,
                doing,
                _one_line(error),
                exc_info=trace,
            )
        elif now - self._reminded_at >= self._remind_every:
            self._reminded_at = now
            self._log.warning(
                "worker %s: the world is still unavailable after %.1f s (%d calls failed): %s",
                self._worker_id,
                now - self._outage_since,
                self._failed_calls,
                _one_line(error),
            )

    def succeeded(self) -> None:
        """Note that a world call succeeded: ends an outage, saying how long it lasted."""
        if self._outage_since is None:
            return
        self._log.warning(
            "worker %s: the world answers again after %.1f s (%d calls failed meanwhile)",
            self._worker_id,
            self._clock() - self._outage_since,
            self._failed_calls,
        )
        self._outage_since = None


def _one_line(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        return "(unprintable error)"
    return " ".join(text.split())
