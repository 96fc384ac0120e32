"""Migration 15 of the SQLite world's schema: each limited key's line of values, indexed.

What: the column ``key_shares.queued`` (default 0) marks a value in its key's
line, and the partial index ``key_shares_line`` on ``key_shares (key, share,
ivalue) WHERE queued = 1`` orders the line by pass, then value. The values with
runs waiting at a limited key are put in line at their pass (the key's virtual
time when they never were served), so a database that had waiters before the
upgrade keeps them.

Why: rfcs/0008-flow-control.md ("Key limits, weights and burst"; issue 27):
a promotion at a limited key read every value with runs waiting (one skip-scan
seek and four lookups per value), so throughput with a key limit fell with the
number of values waiting; with the line indexed it reads the head of the line.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE key_shares ADD COLUMN queued INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX key_shares_line ON key_shares (key, share, ivalue) WHERE queued = 1",
    """INSERT INTO key_shares (key, ivalue, share, queued)
    SELECT DISTINCT s.key, s.ivalue, k.vtime, 1 FROM slots s JOIN key_limits k ON k.key = s.key
    WHERE s.holding = 0
    ON CONFLICT (key, ivalue) DO UPDATE SET queued = 1, share = max(share, excluded.share)""",
)
