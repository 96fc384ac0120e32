"""Migration 7 of the PostgreSQL world's schema: schedules.

What: ``schedules``, with a timer-like index on their wake time.

Why: rfcs/0009-schedules.md; workers look only at unpaused schedules that are
due.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE schedules (
            id text PRIMARY KEY,
            workflow text NOT NULL,
            spec bytea NOT NULL,
            paused boolean NOT NULL,
            note text,
            next_fire_at timestamptz,
            buffered_at timestamptz,
            wake_at timestamptz,
            version bigint NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            leased_until timestamptz
        )""",
    # Workers look only at unpaused schedules that are due: a timer index.
    "CREATE INDEX schedules_wake ON schedules (wake_at) WHERE NOT paused AND wake_at IS NOT NULL",
)
