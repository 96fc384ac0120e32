"""Migration 18 of the SQLite world's schema: an index of runs by creation time.

What: ``runs_created`` on ``runs (created_at)``. Never updated after a run's
insert (its creation time does not change), so it costs one index entry per
run and nothing on status changes.

Why: rfcs/0010-web-ui.md ("Charts over time"): ``World.count_runs`` counts
the runs created in a window per minute; without the index that is a scan of
every run. Closing times already have ``runs_closed``. Run ids are not a
substitute: a world may be given any id (the conformance kit's are not ULIDs).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = ("CREATE INDEX runs_created ON runs (created_at)",)
