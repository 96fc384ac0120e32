"""Claims of the memory world: which run holds each unique (key, value) pair, at what generation.

A released pair keeps its last generation (``released``) so the next holder's
generation follows it; a pruned holder leaves a tombstone (``pruned_status``).
The decisions are ``worlds._rules.claims``; this store keeps the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import msgspec

from worlds._rules import claims
from worlds.semantics import index_value
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    Claim,
    CreateRunRequest,
    EventKind,
    RunRecord,
    RunStatus,
)

__all__ = ["ClaimStore"]


class ClaimStore:
    """The memory world's claims, keyed by (key, indexed value)."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        """Reuse windows and lapses are judged by ``clock``."""
        self._clock = clock
        self._claims: dict[tuple[str, str], Claim] = {}
        self._released: dict[tuple[str, str], int] = {}

    def get(self, key: tuple[str, str]) -> Claim | None:
        """The claim stored for ``key``, lapsed or tombstoned ones included."""
        return self._claims.get(key)

    def held(self, key: tuple[str, str]) -> claims.HeldClaim | None:
        """The claim stored for ``key``, or its tombstone once its run was pruned."""
        held = self._claims.get(key)
        if held is not None:
            return claims.HeldClaim(
                held.run_id, held.generation, held.step, held.lapses_at, held.pruned_status
            )
        if key in self._released:
            return claims.HeldClaim(None, self._released[key])
        return None

    def on_close(self, record: RunRecord) -> None:
        """Apply each claim's reuse window now that its holder closed."""
        assert record.closed_at is not None
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id != record.id or (claim.ttl is None and not claim.release_on):
                continue
            fate = claims.on_close(record.status, record.closed_at, claim.ttl, claim.release_on)
            if fate == "release":
                del self._claims[claim_key]
                self._released[claim_key] = claim.generation
            elif fate is not None:
                self._claims[claim_key] = msgspec.structs.replace(claim, lapses_at=fate)

    def try_set(self, run_id: str, event: AttributeSet) -> EventKind:
        """Claim ``event``'s pair for the run, or the ``AttributeConflict`` if it is taken."""
        key = (event.key, index_value(event.value))
        generation = claims.on_attribute_set(self.held(key), run_id, event, self._clock())
        if isinstance(generation, AttributeConflict):
            return generation
        self._released.pop(key, None)
        self._claims[key] = Claim(
            key=event.key,
            value=event.value,
            run_id=run_id,
            generation=generation,
            step=event.step,
            attempt=event.attempt,
            ttl=event.ttl,
            release_on=event.release_on,
        )
        return msgspec.structs.replace(event, generation=generation)

    def take(self, request: CreateRunRequest, generations: Mapping[tuple[str, str], int]) -> None:
        """Claim the new run's unique pairs: at the generation taken over, else the next."""
        for key in request.unique:
            value = request.attributes[key]
            claim_key = (key, index_value(value))
            if claim_key in generations:
                generation = generations[claim_key]
            else:
                generation = claims.next_generation(self.held(claim_key))
            self._released.pop(claim_key, None)
            window = request.windows.get(key)
            self._claims[claim_key] = Claim(
                key=key,
                value=value,
                run_id=request.run_id,
                generation=generation,
                ttl=None if window is None else window.ttl,
                release_on=frozenset() if window is None else window.release_on,
            )

    def carry(self, old_run_id: str, new_run_id: str) -> None:
        """Hand the run-level claims of ``old_run_id`` to ``new_run_id`` (continue-as-new)."""
        for claim_key, claim in list(self._claims.items()):
            if claim.run_id == old_run_id and claim.step is None:
                generation = claims.next_generation(self.held(claim_key))
                self._claims[claim_key] = msgspec.structs.replace(
                    claim, run_id=new_run_id, generation=generation
                )

    def find(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        claim_key = (key, index_value(value))
        if claims.is_free(self.held(claim_key), self._clock()):
            return None
        return self._claims[claim_key]

    def of_run(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        now = self._clock()
        held = [
            c
            for c in self._claims.values()
            if c.run_id == run_id and not (c.lapses_at is not None and c.lapses_at <= now)
        ]
        return sorted(held, key=lambda claim: (claim.key, index_value(claim.value)))

    def prune(self, pruned: Mapping[str, RunStatus], release_claims: bool) -> None:
        """Release lapsed claims; release or tombstone those of the ``pruned`` runs."""
        now = self._clock()
        for claim_key, claim in list(self._claims.items()):
            lapsed = claim.lapses_at is not None and claim.lapses_at <= now
            if lapsed or (claim.run_id in pruned and release_claims):
                del self._claims[claim_key]
                self._released[claim_key] = claim.generation
            elif claim.run_id in pruned:
                tombstone = {"pruned_status": pruned[claim.run_id], "step": None, "attempt": None}
                self._claims[claim_key] = msgspec.structs.replace(claim, **tombstone)
