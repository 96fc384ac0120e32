"""How the worker rides out a world in trouble: backoff, log manners, fatal errors.

A world error that may heal by waiting (``WorldUnavailableError``: a restarted
database, a lock held too long, a deadlock the database broke; and
``WorldFullError``: space may be freed) is retried with exponential backoff and
jitter, capped, the worker keeping its leases meanwhile. One that cannot
(``WorldMisconfiguredError``: read-only, schema newer than this code,
authentication failed, database missing, the file replaced) stops the
worker. Anything else is a bug or a bad value, retried a bounded number of
times (``POISON_LIMIT``) before the work it belongs to is failed.

An outage of the world (unavailable or full) is logged when it begins, every
ten seconds while it lasts and when it ends, however many calls fail
meanwhile (``_outage.Outage``); any other failure is one line each; the
traceback of a kind of failure is logged the first time only. A ten-second
outage gives a handful of lines, not thousands.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable

import anyio

from workflow.engine._outage import Outage, one_line
from worlds.errors import (
    WorldDeadlockError,
    WorldFullError,
    WorldMisconfiguredError,
    WorldUnavailableError,
    as_world_error,
)

__all__ = [
    "POISON_LIMIT",
    "Backoff",
    "Complaints",
    "is_fatal",
    "is_outage",
    "is_transient",
    "riding_out",
]

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
    """Whether waiting may heal ``exc``: a world that is unavailable for now, a
    deadlock the database broke, or a full world (space may be freed)."""
    return isinstance(as_world_error(exc), WorldUnavailableError | WorldFullError)


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` means the world is down or full (not one call's bad luck)."""
    error = as_world_error(exc)
    return isinstance(error, WorldUnavailableError | WorldFullError) and not isinstance(
        error, WorldDeadlockError
    )


def is_fatal(exc: BaseException) -> WorldMisconfiguredError | None:
    """The world error that waiting cannot heal, if ``exc`` is one (a full world is
    not: it heals when space is freed)."""
    error = as_world_error(exc)
    if isinstance(error, WorldMisconfiguredError) and not isinstance(error, WorldFullError):
        return error
    return None


class Complaints:
    """Logs a worker's failures with manners.

    While the world is in an outage (unavailable or full), its ``Outage`` says
    so when it begins, every ten seconds while it lasts and when it ends,
    however many calls fail meanwhile; every loop that calls the world reports
    its successes here (``succeeded``) so the end is seen. Any other failure
    (a deadlock the database broke included) is one line each. A traceback is
    logged the first time only per kind of failure (the verb of ``doing`` and
    the exception's type).
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
        self._seen: set[tuple[str, type[BaseException]]] = set()
        self.outage = Outage(log, worker_id, remind_every=remind_every, clock=clock)
        """The outage the worker is in, if any."""

    def failed(self, doing: str, exc: BaseException, retry_in: float | None) -> None:
        """Log that ``doing`` failed with ``exc``; ``retry_in`` seconds until the next try."""
        error = as_world_error(exc) or exc
        kind = (doing.split(" ", 1)[0], type(exc))
        first = kind not in self._seen
        self._seen.add(kind)
        trace = exc if first else None
        if retry_in is not None and is_outage(error):
            self.outage.failed(doing, error, trace)
            return
        then = "giving up" if retry_in is None else f"retrying in {retry_in:.2f} s"
        self._log.warning(
            "worker %s could not %s: %s: %s; %s",
            self._worker_id,
            doing,
            type(error).__name__,
            one_line(error),
            then,
            exc_info=trace,
        )

    def succeeded(self, doing: str | None = None) -> None:
        """Note that ``doing`` (a world call; ``None``: of any kind) succeeded: ends
        an outage, saying how long it lasted (``Outage.recovered``)."""
        self.outage.recovered(doing)


async def riding_out(
    call: Callable[[], Awaitable[object]], doing: str, complaints: Complaints, cap: float
) -> None:
    """``call()`` until it succeeds, waiting out a world that is down (a database
    restarting) with backoff up to ``cap`` s as every loop of a worker does; an
    error waiting cannot heal is raised."""
    backoff = Backoff(cap=cap)
    while True:
        try:
            await call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            delay = backoff.next()
            complaints.failed(doing, exc, delay)
            await anyio.sleep(delay)
        else:
            complaints.succeeded(doing)
            return
