"""Migration 16 of the SQLite world's schema: the history of limited pairs' slots.

What: ``slot_samples``, one row per limited (key, value) pair and minute in
which the pair's rows changed: the holders and waiters the minute left, and
the most of each it saw. Keyed (key, ivalue, minute), so a pair's newest
sample before a time is a seek; ``slot_samples_key`` on (key, minute) reads a
key's window, ``slot_samples_minute`` on (minute) finds what pruning deletes.
The slot flows write a sample in the transaction that changes the pair: one
upsert per changed pair per transaction, an insert only once a minute.

Why: rfcs/0010-web-ui.md ("Slot history"): the flow-control view draws, for a
key, holders and waiters per value over the last hour or day; the slots table
holds only the present.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE slot_samples (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        minute INTEGER NOT NULL,
        holders INTEGER NOT NULL,
        waiters INTEGER NOT NULL,
        peak_holders INTEGER NOT NULL,
        peak_waiters INTEGER NOT NULL,
        PRIMARY KEY (key, ivalue, minute)
    ) WITHOUT ROWID""",
    "CREATE INDEX slot_samples_key ON slot_samples (key, minute)",
    "CREATE INDEX slot_samples_minute ON slot_samples (minute)",
)
