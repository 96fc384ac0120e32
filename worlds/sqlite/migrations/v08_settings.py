"""Migration 8 of the SQLite world's schema: world settings.

What: ``settings``, one value per key, written once (the codec the world's
payloads are encoded with, say).

Why: rfcs/0011-ecosystem.md ("Codecs").
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID""",
)
