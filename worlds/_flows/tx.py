"""One transaction as the flows see it: the backend's rows, and what the flows stamped.

A flow numbers and dates the events it appends (``stamp``) and remembers which
of them closed a run, so that storing that run (``closing.save``) does what
closing it does, once. Each entry flow makes its own ``Tx``.
"""

from __future__ import annotations

from worlds._flows.rows import Rows
from worlds._rules import runs
from worlds.types import EventKind, RunRecord

__all__ = ["Tx"]


class Tx:
    """The rows of one transaction and the closing events appended in it."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.closing: dict[str, EventKind] = {}
        """By run: the event that closed it in this transaction, until it is saved."""

    def stamp(self, run: RunRecord, event: EventKind) -> tuple[RunRecord, EventKind]:
        """``event`` numbered and dated as the next of ``run`` and queued; the run after it."""
        run, stored = runs.stamped(run, event, self.rows.now)
        self.append(run.id, stored)
        return run, stored

    def append(self, run_id: str, stored: EventKind) -> None:
        """Queue ``stored``, already numbered and dated, as the next event of ``run_id``."""
        self.rows.append(run_id, stored)
        if isinstance(stored, runs.CLOSING_EVENTS):
            self.closing[run_id] = stored
