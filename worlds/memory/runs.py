"""Runs of the memory world: each run's record and its event log.

The memory world's rows for the ``runs`` and ``events`` of a database: what a
flow reads and writes through ``worlds.memory.rows``, and what the world's
reads scan. Writes go through the world's ``Journal``.

Two indexes stand in for a database's: the run ids in order (``newest_first``:
a page of ``list_runs`` starts at its cursor instead of sorting every run) and
the runs by attribute term (``open_with``: closing a run looks for its open
children, so a bulk cancel of n runs no longer scans n runs n times). Both may
name runs that no longer qualify (a run deleted, an insert undone, an attribute
changed): each read checks what it finds against the records, so neither needs
undoing with the journal.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
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
        self._ids: list[str] = []
        """Every run id, sorted, and perhaps some of runs no longer stored."""
        self._terms: dict[tuple[str, str], dict[str, None]] = {}
        """By (key, index value): every run that has the term, and perhaps some that
        no longer have it."""

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
        self._add(record)
        return True

    def load(self, record: RunRecord, events: Sequence[EventKind]) -> None:
        """Store a run with its whole log, as they are."""
        self._journal.put(self.runs, record.id, StoredRun(record, list(events)))
        self._add(record)

    def store(self, record: RunRecord, events: Sequence[EventKind]) -> None:
        """Append ``events`` to the run's log and keep ``record``, the run after them."""
        run = self.runs[record.id]
        old_record, old_length = run.record, len(run.events)
        if record.admitted_at != old_record.admitted_at:  # only ``admit`` changes it
            record = msgspec.structs.replace(record, admitted_at=old_record.admitted_at)
        run.events.extend(events)
        run.record = record
        if record.attributes is not old_record.attributes:
            self._index_terms(record.id, record.attributes)

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
        having = self._terms.get((key, wanted))
        if not having:
            return []
        found = []
        for run_id in list(having):
            run = self.runs.get(run_id)
            if run is None or key not in run.record.attributes:
                self._journal.pop(having, run_id)  # undone with the write that made it stale
            elif index_value(run.record.attributes[key]) != wanted:
                self._journal.pop(having, run_id)
            elif not run.record.status.is_closed:
                found.append(run.record)
        return sorted(found, key=lambda record: record.id)

    def newest_first(self, before: str | None = None) -> Iterator[RunRecord]:
        """The runs, newest id first; only those whose id is below ``before``, if given.

        A read, never run inside an operation: it may tidy the id index.
        """
        if len(self._ids) > 2 * len(self.runs) + 64:  # mostly ids of runs gone
            self._ids = sorted(self.runs)
        ids = self._ids
        index = len(ids) if before is None else bisect.bisect_left(ids, before)
        while index > 0:
            index -= 1
            run = self.runs.get(ids[index])
            if run is not None:
                yield run.record

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

    def _add(self, record: RunRecord) -> None:
        """Index a run just stored: its id and its attributes."""
        at = bisect.bisect_left(self._ids, record.id)  # ULIDs grow: nearly always the end
        if at == len(self._ids) or self._ids[at] != record.id:
            self._ids.insert(at, record.id)
        self._index_terms(record.id, record.attributes)

    def _index_terms(self, run_id: str, attributes: Mapping[str, AttributeValue]) -> None:
        """Index the run's ``attributes``. The indexes only grow here; reads drop what
        went stale."""
        for key, value in attributes.items():
            self._terms.setdefault((key, index_value(value)), {})[run_id] = None
