"""Migration 18 of the SQLite world's schema: an index of runs by creation time.

What: ``runs_created`` on ``runs (created_at, status)`` and ``runs_closed_status``
on ``runs (closed_at, status)`` for closed runs: covering indexes, so counting a
window's runs per status reads the index alone, not each run's row (a run's row
holds its attributes and result: many runs to a page of the index, few to a page
of the table). Their cost: a status change updates one more
index entry (status and ``closed_at`` are indexed already, so no update that
was cheap before becomes dear).

Why: rfcs/0010-web-ui.md ("Pictures"): ``World.count_runs`` counts the runs
created or closed in a window per minute and status; without the indexes that
is a scan of every run. Run ids are no substitute: a world may be given any
id (the conformance kit's are not ULIDs).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    "CREATE INDEX runs_created ON runs (created_at, status)",
    "CREATE INDEX runs_closed_status ON runs (closed_at, status) WHERE closed_at IS NOT NULL",
)
