"""Migration 17 of the SQLite world's schema: a rate-limited run's admission time.

What: ``runs.admitted_at`` (microseconds, nullable): for a run started with a
``RateLimited`` value, the time its tokens let it start, written when the run is
created and when its tokens move (priority, ``start_now``, ``set_delay``); NULL
for every other run. The commit that stores the run's ``RunStarted`` dates it
and ``started_at`` at this time.

Why: rfcs/0008-flow-control.md (section 6, "What a token counts"): a run's
recorded start is its admission, so the windows of recorded start times keep
the rate however late a worker begins the run. The token rows cannot say it:
they lapse one window after their time, while a run may wait longer for a
worker; the run row is read by every commit anyway.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = ("ALTER TABLE runs ADD COLUMN admitted_at INTEGER",)
