"""Slot history of the memory world: one sample per limited pair and minute.

The rows ``worlds._flows.slot_history`` writes through ``worlds.memory.rows``
(``sample_slots``, ``drop_slot_samples``) and ``World.slot_history`` reads;
writes go through the world's ``Journal``, so a transaction undone takes its
samples with it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from worlds._flows.rows import Pair
from worlds.memory.journal import Journal
from worlds.semantics import bucket_of
from worlds.types import SlotSample

__all__ = ["SampleStore"]


class SampleStore:
    """Samples by pair, then by minute."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._pairs: dict[Pair, dict[datetime, SlotSample]] = {}

    def put(self, pair: Pair, minute: datetime, holders: int, waiters: int) -> None:
        """Store the pair's levels as its sample of ``minute``, keeping the minute's peaks."""
        minutes = self._pairs.get(pair)
        if minutes is None:
            minutes = {}
            self._journal.put(self._pairs, pair, minutes)
        old = minutes.get(minute)
        if old is None:
            new = SlotSample(
                key=pair[0],
                ivalue=pair[1],
                minute=minute,
                holders=holders,
                waiters=waiters,
                peak_holders=holders,
                peak_waiters=waiters,
            )
        else:
            new = msgspec.structs.replace(
                old,
                holders=holders,
                waiters=waiters,
                peak_holders=max(old.peak_holders, holders),
                peak_waiters=max(old.peak_waiters, waiters),
            )
        self._journal.put(minutes, minute, new)

    def history(self, key: str, since: datetime, until: datetime, width: int) -> list[SlotSample]:
        """The key's history (``World.slot_history``): each pair's newest sample before
        ``since``, then its samples of ``[since, until)`` merged per bucket."""
        found: list[SlotSample] = []
        for pair in sorted(p for p in self._pairs if p[0] == key):
            minutes = sorted(self._pairs[pair].items())
            before = [s for m, s in minutes if m < since]
            found.extend(before[-1:])
            merged: dict[int, SlotSample] = {}
            for minute, sample in minutes:
                if not since <= minute < until:
                    continue
                bucket = bucket_of(minute, since, width)
                start = since + timedelta(seconds=bucket * width)
                old = merged.get(bucket)
                merged[bucket] = msgspec.structs.replace(
                    sample,
                    minute=start,
                    peak_holders=max(sample.peak_holders, old.peak_holders if old else 0),
                    peak_waiters=max(sample.peak_waiters, old.peak_waiters if old else 0),
                )
            found.extend(merged[bucket] for bucket in sorted(merged))
        return found

    def drop(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` samples before ``before``, each pair's newest kept
        unless it shows the pair empty."""
        dropped = 0
        for pair in sorted(self._pairs):
            minutes = self._pairs[pair]
            newest = max(minutes)
            for minute in sorted(minutes):
                if dropped >= limit or minute >= before:
                    break
                sample = minutes[minute]
                if minute == newest and (sample.holders or sample.waiters):
                    continue
                self._journal.pop(minutes, minute)
                dropped += 1
            if not minutes:
                self._journal.pop(self._pairs, pair)
        return dropped
