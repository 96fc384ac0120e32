"""One worker's record of a world outage: the lines that say when it began, lasts and ends.

An outage is a stretch of time in which the world's calls fail in a way that
waiting may heal: it is unavailable (``WorldUnavailableError``: a restarted
database, a lock held too long) or full (``WorldFullError``: the disk, or
SQLite's ``max_page_count``). Every loop of a worker that calls the world (the
dispatcher's poll, lease renewal, commits, workflow tasks, schedules) tells
the one ``Outage`` of its worker about each failed call (``failed``) and each
call that succeeded (``recovered``), so the worker logs an outage three ways
only: when it begins, every ``remind_every`` seconds while it lasts, and when
it ends, however many calls and loops fail meanwhile.

When does it end? Some calls succeed in the middle of an outage: reads while
another process holds SQLite's write lock, renewals (rewriting a row in place)
while the disk is full. So an outage ends when a call of the kind that began it
(its verb: ``commit``, ``lease``, ``fire``) succeeds, or when any call succeeds
and none has failed for ``quiet`` seconds (the kind that began it may not be
tried again soon: a commit, once the worker is idle). Either way the next
outage begins afresh: its first line is never a "still" line carrying the time
of an outage long over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from worlds.errors import WorldFullError

__all__ = ["Outage", "one_line"]


class Outage:
    """The outage a worker is in, if any, and its log lines.

    Args:
        log: where the lines go (warnings).
        worker_id: the worker the lines name.
        remind_every: seconds between two "still" lines of one outage.
        quiet: seconds without a failed call after which any call that succeeds
            ends the outage (longer than the workers' retry backoffs).
        clock: monotonic seconds (a test's clock in tests).
    """

    def __init__(
        self,
        log: logging.Logger,
        worker_id: str,
        *,
        remind_every: float = 10.0,
        quiet: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._worker_id = worker_id
        self._remind_every = remind_every
        self._quiet = quiet
        self._clock = clock
        self._since: float | None = None
        self._failed_at = 0.0
        self._reminded_at = 0.0
        self._failed_calls = 0
        self._full = False
        self._verb = ""

    @property
    def ongoing(self) -> bool:
        """Whether an outage has begun and not yet ended."""
        return self._since is not None

    def failed(self, doing: str, error: BaseException, trace: BaseException | None) -> None:
        """Note that ``doing`` failed with ``error`` (unavailable or full); ``trace``: the
        exception whose traceback to log with the first line, if any."""
        now = self._clock()
        self._failed_at = now
        self._full = isinstance(error, WorldFullError)
        state = "full" if self._full else "unavailable"
        if self._since is None:
            self._since = self._reminded_at = now
            self._failed_calls = 1
            self._verb = _verb(doing)
            then = (
                "keeping its leases and retrying until space is freed"
                if self._full
                else "retrying with backoff"
            )
            self._log.warning(
                "worker %s: the world is %s (could not %s): %s; %s",
                self._worker_id,
                state,
                doing,
                one_line(error),
                then,
                exc_info=trace,
            )
            return
        self._failed_calls += 1
        if now - self._reminded_at >= self._remind_every:
            self._reminded_at = now
            self._log.warning(
                "worker %s: the world is still %s after %.1f s (%d calls failed): %s",
                self._worker_id,
                state,
                now - self._since,
                self._failed_calls,
                one_line(error),
            )

    def recovered(self, doing: str | None = None) -> None:
        """Note that a world call (``doing``; ``None``: of the kind that began the
        outage) succeeded: ends the outage, saying how long it lasted, if the call
        is of the kind that began it or no call failed for ``quiet`` seconds."""
        if self._since is None:
            return
        now = self._clock()
        other_kind = doing is not None and _verb(doing) != self._verb
        if other_kind and now - self._failed_at < self._quiet:
            return  # calls of its kind still fail: this one needed less of the world
        self._log.warning(
            "worker %s: the world %s after %.1f s (%d calls failed meanwhile)",
            self._worker_id,
            "has room again" if self._full else "answers again",
            now - self._since,
            self._failed_calls,
        )
        self._since = None


def _verb(doing: str) -> str:
    return doing.split(" ", 1)[0]


def one_line(exc: BaseException) -> str:
    """``str(exc)`` on one line (whitespace runs become one space), even if it cannot print."""
    try:
        text = str(exc)
    except Exception:
        return "(unprintable error)"
    return " ".join(text.split())
