"""Migration 18 of the PostgreSQL world's schema: each limited key's line of values, indexed.

What: the column ``key_shares.queued`` (default false) marks a value in its
key's line, and the partial index ``key_shares_line`` on ``key_shares (key,
share, ivalue COLLATE "C") WHERE queued`` orders the line by pass, then value
(binary order, the one every world sorts index text in). The values with runs
waiting at a limited key are put in line at their pass (the key's virtual time
when they never were served), so a database that had waiters before the
upgrade keeps them.

Why: rfcs/0008-flow-control.md ("Key limits, weights and burst"; issue 27):
a promotion at a limited key read every value with runs waiting (a skip scan
with four lookups per value), so throughput with a key limit fell with the
number of values waiting; with the line indexed it reads the head of the line.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE key_shares ADD COLUMN queued boolean NOT NULL DEFAULT false",
    'CREATE INDEX key_shares_line ON key_shares (key, share, ivalue COLLATE "C") WHERE queued',
    """INSERT INTO key_shares (key, ivalue, share, queued)
    SELECT DISTINCT s.key, s.ivalue, k.vtime, true FROM slots s JOIN key_limits k ON k.key = s.key
    WHERE NOT s.holding
    ON CONFLICT (key, ivalue) DO UPDATE
    SET queued = true, share = greatest(key_shares.share, excluded.share)""",
)
