"""Runs of the memory world: each run's record and its event log.

The memory world's rows for the ``runs`` and ``events`` of a database: what a
flow reads and writes through ``worlds.memory.rows``, and what the world's
reads scan. Writes go through the world's ``Journal``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from worlds.memory.journal import Journal
from worlds.semantics import PIN_KEY, index_value
from worlds.types import AttributeValue, EventKind, RunCreated, RunRecord, RunStatus

__all__ = ["RunStore", "StoredRun"]


@dataclass
class StoredRun:
    """A run's record and its log."""

    record: RunRecord
    events: list[EventKind] = field(default_factory=list)


class RunStore:
    """The memory world's runs, by id."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self.runs: dict[str, StoredRun] = {}

    def __iter__(self) -> Iterator[RunRecord]:
        return (run.record for run in self.runs.values())

    def get(self, run_id: str) -> RunRecord | None:
        """The run's record, or ``None``."""
        run = self.runs.get(run_id)
        return None if run is None else run.record

    def events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """The run's events with ``seq > after_seq``."""
        run = self.runs.get(run_id)
        return [] if run is None else run.events[max(after_seq, 0) :]

    def insert(self, record: RunRecord, created: RunCreated) -> bool:
        """Store a new run and its ``RunCreated``; False if the id is taken."""
        if record.id in self.runs:
            return False
        self._journal.put(self.runs, record.id, StoredRun(record, [created]))
        return True

    def load(self, record: RunRecord, events: Sequence[EventKind]) -> None:
        """Store a run with its whole log, as they are."""
        self._journal.put(self.runs, record.id, StoredRun(record, list(events)))

    def store(self, record: RunRecord, events: Sequence[EventKind]) -> None:
        """Append ``events`` to the run's log and keep ``record``, the run after them."""
        run = self.runs[record.id]
        old_record, old_length = run.record, len(run.events)
        if record.admitted_at != old_record.admitted_at:  # only ``admit`` changes it
            record = msgspec.structs.replace(record, admitted_at=old_record.admitted_at)
        run.events.extend(events)
        run.record = record

        def undo() -> None:
            del run.events[old_length:]
            run.record = old_record

        self._journal.record(undo)

    def admit(self, run_id: str, at: datetime) -> None:
        """Record the run's admission time (``RunRecord.admitted_at``)."""
        run = self.runs[run_id]
        old = run.record
        run.record = msgspec.structs.replace(old, admitted_at=at)
        self._journal.record(lambda: setattr(run, "record", old))

    def rewrite_created(self, run_id: str, created: RunCreated) -> None:
        """Replace the run's first event."""
        run = self.runs[run_id]
        old = run.events[0]
        run.events[0] = created
        self._journal.record(lambda: run.events.__setitem__(0, old))

    def open_with(self, key: str, value: AttributeValue) -> list[RunRecord]:
        """The open runs whose attribute ``key`` has ``value``'s index value, by id."""
        wanted = index_value(value)
        found = [
            run.record
            for run in self.runs.values()
            if not run.record.status.is_closed
            and key in run.record.attributes
            and index_value(run.record.attributes[key]) == wanted
        ]
        return sorted(found, key=lambda record: record.id)

    def closed_before(
        self, before: datetime, limit: int, status: RunStatus | None = None
    ) -> list[str]:
        """Up to ``limit`` runs closed before ``before`` (as ``status``, if given),
        oldest first, passing over the pinned ones (``$pinned``)."""
        closed = [
            run.record
            for run in self.runs.values()
            if run.record.closed_at is not None
            and run.record.closed_at < before
            and (status is None or run.record.status is status)
            and run.record.attributes.get(PIN_KEY) is not True
        ]
        closed.sort(key=lambda record: (record.closed_at or before, record.id))
        return [record.id for record in closed[:limit]]

    def delete(self, run_ids: Sequence[str]) -> None:
        """Forget the runs."""
        for run_id in run_ids:
            self._journal.pop(self.runs, run_id)
