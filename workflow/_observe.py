"""The seam for observability integrations (``workflow.contrib.opentelemetry``).

The client and the engine report a few moments of a run's life here; an
integration installs one ``Instrumentation`` that turns them into spans and
metrics. With none installed every call is a no-op. Moments are reported by the
process that lives them, once: replaying a workflow reports nothing.

- ``starting``: a caller creates a run (``start``, the start policies). The
  headers it returns are stored with the run's arguments, so every worker, in
  any process, later sees them (a trace context, say).
- ``step_attempt``: a worker runs one attempt of a step; the headers are the
  run's, as carried by the step's arguments.
- ``run_closed``: a worker committed the event that closed a run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from worlds.types import AttributeValue, ErrorInfo

__all__ = [
    "DUE_HEADER",
    "AttemptReport",
    "Instrumentation",
    "RunClosed",
    "StartReport",
    "StepAttempt",
    "current",
    "install",
    "run_closed",
    "starting",
    "step_attempt",
    "uninstall",
]


DUE_HEADER = "workflow.due"
"""Header of a step's arguments: when the attempt became due (POSIX seconds), set
only while an instrumentation is installed; it gives the queue lag."""


@dataclass
class StartReport:
    """Filled in by the caller while ``starting`` is open."""

    run_id: str | None = None
    """The run that was created (or found, for an idempotent start)."""
    error: BaseException | None = None
    """Why no run was created."""


@dataclass(frozen=True)
class StepAttempt:
    """One attempt of a step, as a worker is about to run it."""

    run_id: str
    workflow: str
    step: str
    number: int
    attempt: int
    headers: Mapping[str, str]


@dataclass
class AttemptReport:
    """Filled in by the worker while ``step_attempt`` is open."""

    outcome: str = "cancelled"
    """``completed``, ``retrying``, ``failed`` or ``cancelled``."""
    error: BaseException | None = None
    retry_at: datetime | None = None


@dataclass(frozen=True)
class RunClosed:
    """A run a worker closed (its closing event committed)."""

    run_id: str
    workflow: str
    status: str
    created_at: datetime
    closed_at: datetime
    headers: Mapping[str, str]
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    error: ErrorInfo | None = None


class Instrumentation(Protocol):
    """What an integration implements; each method must not raise."""

    def starting(
        self, workflow: str, attributes: Mapping[str, Any], report: StartReport
    ) -> contextlib.AbstractContextManager[dict[str, str]]:
        """Open around the creation of a run; yields headers to store with it."""
        ...

    def step_attempt(
        self, attempt: StepAttempt, report: AttemptReport
    ) -> contextlib.AbstractContextManager[None]:
        """Open around one attempt of a step (the step body runs inside it)."""
        ...

    def run_closed(self, closed: RunClosed) -> None:
        """A worker closed a run."""
        ...


_installed: list[Instrumentation] = []


def install(instrumentation: Instrumentation) -> None:
    """Make ``instrumentation`` the one in force (replacing any other)."""
    _installed[:] = [instrumentation]


def uninstall() -> None:
    """Remove the instrumentation in force, if any."""
    _installed.clear()


def current() -> Instrumentation | None:
    """The instrumentation in force, or None."""
    return _installed[0] if _installed else None


@contextlib.contextmanager
def starting(
    workflow: str, attributes: Mapping[str, Any], report: StartReport
) -> Iterator[dict[str, str]]:
    """See ``Instrumentation.starting``; yields no headers when nothing is installed."""
    instrumentation = current()
    if instrumentation is None:
        yield {}
        return
    with instrumentation.starting(workflow, attributes, report) as headers:
        yield headers


@contextlib.contextmanager
def step_attempt(attempt: StepAttempt, report: AttemptReport) -> Iterator[None]:
    """See ``Instrumentation.step_attempt``."""
    instrumentation = current()
    if instrumentation is None:
        yield
        return
    with instrumentation.step_attempt(attempt, report):
        yield


def run_closed(closed: RunClosed) -> None:
    """See ``Instrumentation.run_closed``."""
    instrumentation = current()
    if instrumentation is not None:
        instrumentation.run_closed(closed)
