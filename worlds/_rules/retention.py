"""Retention: which closed runs a prune may delete, and the pin that exempts one.

A run is pinned while its attributes hold ``PIN_KEY`` (``$pinned``, set and
removed only by ``World.pin_run``): no prune deletes it, whatever its age or
the query that matched it. Retention keeps each closed status for its own
window (``keep``, seconds): a run closed as ``status`` is past it once it
closed before ``now - keep[status]``. The window is per status so a world can
keep failed runs a month for debugging and completed ones a week.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import msgspec

from worlds.types import RunRecord, RunStatus

__all__ = [
    "CLOSED_STATUSES",
    "PIN_KEY",
    "cutoffs",
    "is_pinned",
    "pinned",
    "prunable",
    "refusal",
]

PIN_KEY = "$pinned"
"""The attribute a pinned run holds (the value ``True``); queries can use it."""

CLOSED_STATUSES = (
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.CONTINUED,
)
"""The statuses a retention window may be set for, in display order."""


def is_pinned(run: RunRecord) -> bool:
    """Whether ``run`` is exempt from every prune."""
    return run.attributes.get(PIN_KEY) is True


def pinned(run: RunRecord, pin: bool) -> RunRecord:
    """``run`` with its pin set (``pin``) or removed; ``run`` itself when unchanged."""
    if is_pinned(run) == pin:
        return run
    attributes = {k: v for k, v in run.attributes.items() if k != PIN_KEY}
    if pin:
        attributes[PIN_KEY] = True
    return msgspec.structs.replace(run, attributes=attributes)


def refusal(run: RunRecord | None) -> str | None:
    """Why ``run`` cannot be pruned now, or ``None`` if it can (``None`` run: gone)."""
    if run is None:
        return None
    if not run.status.is_closed:
        return f"run {run.id} is {run.status.value}: only closed runs are pruned"
    if is_pinned(run):
        return f"run {run.id} is pinned: unpin it first"
    return None


def prunable(runs: Mapping[str, RunRecord | None]) -> list[str]:
    """Those of ``runs`` (by id; ``None``: already gone) a prune deletes, in id order."""
    return sorted(
        run_id for run_id, run in runs.items() if run is not None and refusal(run) is None
    )


def cutoffs(keep: Mapping[RunStatus, float], now: datetime) -> list[tuple[RunStatus, datetime]]:
    """For each status with a window, the close time before which its runs are past it.

    Raises:
        ValueError: a status that is not closed, or a negative window.
    """
    found: list[tuple[RunStatus, datetime]] = []
    for status in CLOSED_STATUSES:
        if status not in keep:
            continue
        seconds = keep[status]
        if seconds < 0:
            raise ValueError(f"retention of {status.value} runs must be >= 0, got {seconds}")
        found.append((status, now - timedelta(seconds=seconds)))
    extra = [s for s in keep if s not in CLOSED_STATUSES]
    if extra:
        raise ValueError(f"retention is for closed statuses only, not {extra[0]}")
    return found
