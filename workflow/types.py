"""Small value types of the public API. Imports nothing from the project."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Literal, TypeVar

__all__ = ["Limited", "RateLimited", "RunMetadata", "StepMetadata", "Unique"]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Unique(Generic[V]):
    """Marks a start-time attribute value as unique across the world.

    ``start(fn, attributes={"order": Unique("o-1")})`` claims ``order=o-1`` in the
    same atomic operation that creates the run. The claim stays with its holder
    after it closes ("never run this order twice"), unless a reuse window frees
    it: ``release_on={"failed", "cancelled"}`` releases it when the holder
    closes with one of those statuses, ``ttl`` (seconds or a ``timedelta``) lets
    it lapse that long after the holder closed.
    """

    value: V
    ttl: float | timedelta | None = None
    release_on: Collection[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Limited(Generic[V]):
    """Marks a start-time attribute value as a pair at most ``limit`` open runs hold.

    ``start(fn, attributes={"tenant": Limited("acme", 3)})`` takes one of the
    three slots of ``tenant=acme`` in the same atomic operation that creates the
    run. When all are held, ``on_full="queue"`` (the default) still creates the
    run, pending, and it waits (holding no worker) until a slot frees: waiting
    runs of one pair start first in first out, and a full pair never delays runs
    of other pairs. A slot frees when its holder closes, whatever the outcome.
    ``on_full="fail"`` makes ``start`` raise ``AttributeConflictError`` naming
    a holder instead, creating nothing. The value is stored as a plain
    attribute, so ``list_runs(attributes={"tenant": "acme"})`` finds holders and
    waiters alike.
    """

    value: V
    limit: int
    on_full: Literal["queue", "fail"] = "queue"
    burst: int = 0
    """Slots the pair may take above ``limit`` while its key's limit
    (``set_key_limit``) has free capacity; unused when the key has no limit."""

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise TypeError(f"Limited's limit is an int, not {type(self.limit).__name__}")
        if not 1 <= self.limit <= 1_000_000:
            raise ValueError(f"Limited's limit must be 1-1000000, got {self.limit}")
        if self.on_full not in ("queue", "fail"):
            raise ValueError(f"on_full must be 'queue' or 'fail', got {self.on_full!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int):
            raise TypeError(f"Limited's burst is an int, not {type(self.burst).__name__}")
        if not 0 <= self.burst <= 1_000_000:
            raise ValueError(f"Limited's burst must be 0-1000000, got {self.burst}")


@dataclass(frozen=True, slots=True)
class RateLimited(Generic[V]):
    """Marks a start-time attribute value as a pair at most ``limit`` runs start
    with per sliding window of ``per`` (seconds or a ``timedelta``).

    ``start(fn, attributes={"customer": RateLimited("c-9", 10, per=60)})`` takes a
    token of ``customer=c-9`` in the same atomic operation that creates the run:
    no window of 60 seconds ever holds more than 10 starts of the pair. When the
    window is full, ``on_full="queue"`` (the default) still creates the run,
    pending (holding no worker), and it starts as soon as the window allows, in
    arrival order; ``on_full="fail"`` makes ``start`` raise
    ``RateLimitExceededError`` (whose ``retry_after`` says when a start would be
    admitted) instead, creating nothing. The value is stored as a plain attribute.
    """

    value: V
    limit: int
    per: float | timedelta
    on_full: Literal["queue", "fail"] = "queue"

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise TypeError(f"RateLimited's limit is an int, not {type(self.limit).__name__}")
        if not 1 <= self.limit <= 1_000_000:
            raise ValueError(f"RateLimited's limit must be 1-1000000, got {self.limit}")
        per = self.per
        if isinstance(per, bool) or not isinstance(per, int | float | timedelta):
            raise TypeError(
                f"RateLimited's per is seconds or a timedelta, not {type(per).__name__}"
            )
        seconds = per.total_seconds() if isinstance(per, timedelta) else float(per)
        if not (math.isfinite(seconds) and 0 < seconds <= 100 * 365 * 86400):
            raise ValueError(
                f"RateLimited's per must be > 0 seconds and at most 100 years, got {per}"
            )
        if self.on_full not in ("queue", "fail"):
            raise ValueError(f"on_full must be 'queue' or 'fail', got {self.on_full!r}")

    @property
    def seconds(self) -> float:
        """``per`` in seconds."""
        per = self.per
        return per.total_seconds() if isinstance(per, timedelta) else float(per)


@dataclass(frozen=True, slots=True)
class RunMetadata:
    """What a workflow (or step) knows about its run.

    ``parent_run_id`` names the run that started this one as a child run
    (``start`` inside a workflow), or is None.
    """

    run_id: str
    workflow: str
    created_at: datetime
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True)
class StepMetadata:
    """What a step attempt knows about itself.

    ``step_id`` is unique in the world and stable across retries of the step,
    so it serves as an idempotency key for external systems. ``attempt`` starts
    at 1.
    """

    run_id: str
    step_id: str
    step_name: str
    attempt: int
