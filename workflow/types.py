"""Small value types of the public API. Imports nothing from the project."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

__all__ = ["RunMetadata", "StepMetadata", "Unique"]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Unique(Generic[V]):
    """Marks a start-time attribute value as unique across the world.

    ``start(fn, attributes={"order": Unique("o-1")})`` claims ``order=o-1`` in the
    same atomic operation that creates the run.
    """

    value: V


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
