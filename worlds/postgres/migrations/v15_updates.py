"""Migration 15 of the PostgreSQL world's schema: the updates each run accepted.

What: ``updates``, one row per (run, update id) a run accepted, with the
sequence number of its ``UpdateReceived`` event. The primary key makes an id
accepted once per run, also between concurrent transactions (the second insert
waits for the first and then finds it); the answer is read from the run's log
from that event on.

Why: rfcs/0021-updates.md: an update is delivered once per id, whatever the
number of callers and processes, and every caller gets the one recorded reply.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE updates (
        run_id text NOT NULL,
        update_id text NOT NULL,
        seq bigint NOT NULL,
        PRIMARY KEY (run_id, update_id)
    )""",
)
