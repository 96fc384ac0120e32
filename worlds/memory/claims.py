"""Claims of the memory world: which run holds each unique (key, value) pair, at what generation.

A released pair keeps its last generation (``released``) so the next holder's
generation follows it; a pruned holder leaves a tombstone (``pruned_status``).
The rows a flow reads and writes (``worlds.memory.rows``) and what the world's
reads ask; writes go through the world's ``Journal``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import msgspec

from worlds._flows.rows import ClaimRow, HeldClaim, Pair, Windowed
from worlds.memory.by_run import ByRun
from worlds.memory.journal import Journal
from worlds.semantics import index_value, is_free
from worlds.types import AttributeValue, Claim, ReuseWindow, RunStatus

__all__ = ["ClaimStore"]


class ClaimStore:
    """The memory world's claims, keyed by (key, indexed value)."""

    def __init__(self, journal: Journal, clock: Callable[[], datetime]) -> None:
        """Lapses are judged by ``clock`` in the world's reads."""
        self._journal = journal
        self._clock = clock
        self._claims: ByRun[Pair, Claim] = ByRun(lambda claim: claim.run_id)
        self._released: dict[Pair, int] = {}

    # ------------------------------------------------------------ rows a flow reads and writes

    def held(self, pair: Pair) -> HeldClaim | None:
        """The claim stored for ``pair`` (a tombstone too), or its released generation."""
        held = self._claims.get(pair)
        if held is not None:
            window = ReuseWindow(ttl=held.ttl, release_on=held.release_on)
            return HeldClaim(
                held.run_id, held.generation, held.step, held.lapses_at, held.pruned_status, window
            )
        if pair in self._released:
            return HeldClaim(None, self._released[pair])
        return None

    def claim_if_free(self, claim: ClaimRow) -> int | None:
        """Take ``claim`` unless a row holds its pair; its generation, or ``None``."""
        if claim.pair in self._claims:
            return None
        generation = self._released.get(claim.pair, 0) + 1
        self.put(claim, generation)
        return generation

    def put(self, claim: ClaimRow, generation: int) -> None:
        """Store ``claim`` at ``generation``."""
        self._journal.pop(self._released, claim.pair)
        stored = Claim(
            key=claim.pair[0],
            value=claim.value,
            run_id=claim.run_id,
            generation=generation,
            step=claim.step,
            attempt=claim.attempt,
            ttl=claim.window.ttl,
            release_on=claim.window.release_on,
        )
        self._journal.put(self._claims, claim.pair, stored)

    def windowed(self, run_id: str) -> list[Windowed]:
        """The claims ``run_id`` holds that have a reuse window."""
        return [
            Windowed(pair, claim.ttl, claim.release_on)
            for pair in self._claims.keys_of(run_id)
            if (claim := self._claims[pair]).ttl is not None or claim.release_on
        ]

    def release(self, pair: Pair) -> None:
        """Free ``pair``, keeping its generation."""
        claim = self._journal.pop(self._claims, pair)
        if claim is not None:
            self._journal.put(self._released, pair, claim.generation)

    def lapse(self, pair: Pair, at: datetime) -> None:
        """Mark ``pair`` free from ``at`` on."""
        claim = self._claims[pair]
        self._journal.put(self._claims, pair, msgspec.structs.replace(claim, lapses_at=at))

    def carry(self, old_run_id: str, new_run_id: str) -> None:
        """Hand the run-level claims of ``old_run_id`` to ``new_run_id``, one generation up."""
        for pair in self._claims.keys_of(old_run_id):
            claim = self._claims[pair]
            if claim.step is None:
                moved = msgspec.structs.replace(
                    claim, run_id=new_run_id, generation=claim.generation + 1
                )
                self._journal.put(self._claims, pair, moved)

    def release_lapsed(self, now: datetime) -> None:
        """Free every claim whose lapse time passed."""
        for pair, claim in list(self._claims.items()):
            if claim.lapses_at is not None and claim.lapses_at <= now:
                self.release(pair)

    def retire(self, statuses: Mapping[str, RunStatus], *, release: bool) -> None:
        """The claims of the pruned runs (``statuses``: their final status): released, or
        kept as tombstones."""
        for run_id in statuses:
            for pair in self._claims.keys_of(run_id):
                self._retire(pair, statuses[run_id], release=release)

    def _retire(self, pair: Pair, status: RunStatus, *, release: bool) -> None:
        claim = self._claims[pair]
        if release:
            self.release(pair)
        else:
            tombstone = msgspec.structs.replace(
                claim, pruned_status=status, step=None, attempt=None
            )
            self._journal.put(self._claims, pair, tombstone)

    def release_tombstones(self) -> None:
        """Free every tombstone."""
        for pair, claim in list(self._claims.items()):
            if claim.pruned_status is not None:
                self.release(pair)

    # ------------------------------------------------------------ a full dump and load

    def dump(self) -> tuple[list[Claim], list[tuple[Pair, int]]]:
        """Every stored claim (tombstones too) and every released pair's generation."""
        return list(self._claims.values()), list(self._released.items())

    def load(self, claim: Claim) -> None:
        """Store ``claim`` as it is."""
        self._journal.put(self._claims, (claim.key, index_value(claim.value)), claim)

    def load_released(self, pair: Pair, generation: int) -> None:
        """Store ``pair`` as released at ``generation``."""
        self._journal.put(self._released, pair, generation)

    # ------------------------------------------------------------ the world's reads

    def find(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        pair = (key, index_value(value))
        if is_free(self.held(pair), self._clock()):
            return None
        return self._claims[pair]

    def of_run(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        now = self._clock()
        held = [
            c
            for c in self._claims.of(run_id)
            if not (c.lapses_at is not None and c.lapses_at <= now)
        ]
        return sorted(held, key=lambda claim: (claim.key, index_value(claim.value)))
