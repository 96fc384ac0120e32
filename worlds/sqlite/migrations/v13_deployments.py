"""Migration 17 of the SQLite world's schema: pinned deployments.

What: the columns ``runs.build_id`` and ``runs.pin`` (the build whose worker ran
a run's first task and the run's pin there; NULL for runs without a build), the
partial index ``runs_build`` over the runs that recorded a build, and
``deployments``, one row per (build id, workflow) a worker of that build
registered, with the workflow's pin and when the build was first registered.

Why: rfcs/0025-deployments.md (issue 31): each run stays on the code it started
with; a worker of another codebase under the same build id is refused.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE runs ADD COLUMN build_id TEXT",
    "ALTER TABLE runs ADD COLUMN pin TEXT",
    "CREATE INDEX runs_build ON runs (build_id, status) WHERE build_id IS NOT NULL",
    """CREATE TABLE deployments (
        build_id TEXT NOT NULL,
        workflow TEXT NOT NULL,
        pin TEXT NOT NULL,
        registered_at INTEGER NOT NULL,
        PRIMARY KEY (build_id, workflow)
    ) WITHOUT ROWID""",
)
