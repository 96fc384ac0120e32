"""Migration 10 of the PostgreSQL world's schema: slots taken by ``hold()``.

What: a slot row's hold number (0: a start-time slot of ``Limited``).

Why: ``hold()`` inside workflows (rfcs/0008-flow-control.md).
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = ("ALTER TABLE slots ADD COLUMN hold integer NOT NULL DEFAULT 0",)
