"""Charts of the web UI, drawn on the server as SVG: runs per minute, slots per value.

Pure functions from counts to rectangles (``Bar``), which the templates
write as ``<rect>`` elements coloured by class (the Content-Security-Policy
allows no inline style): ``stacked`` for runs started or closed per bucket
and status (``World.count_runs``), ``levels`` for holders and waiters per
value of a limited key (``World.list_key_slots``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workflow.views import format_value
from worlds.query import RunCount
from worlds.types import RunStatus, Slot

__all__ = [
    "CHART_HEIGHT",
    "CHART_WIDTH",
    "Bar",
    "Level",
    "bucket_totals",
    "levels",
    "stacked",
]

CHART_WIDTH = 960
"""Width of a chart's plot, in SVG user units (the SVG scales to the page)."""
CHART_HEIGHT = 120
"""Height of a chart's plot, in SVG user units."""


@dataclass(frozen=True)
class Bar:
    """A rectangle of a chart, in SVG user units, with its tone (a CSS class) and tooltip."""

    x: float
    y: float
    width: float
    height: float
    tone: str
    title: str


def bucket_totals(counts: Sequence[RunCount]) -> dict[int, int]:
    """Runs per bucket, all statuses together."""
    totals: dict[int, int] = {}
    for count in counts:
        totals[count.bucket] = totals.get(count.bucket, 0) + count.count
    return totals


def stacked(
    counts: Sequence[RunCount], buckets: int, label: str, *, top: int | None = None
) -> list[Bar]:
    """Bars per bucket, one segment per status stacked bottom-up (in ``RunStatus`` order).

    ``top`` is the count the plot's full height stands for (default: the
    largest bucket), so two charts can share a scale. Buckets outside
    ``0..buckets-1`` are ignored (a world never returns them).
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    totals = bucket_totals(counts)
    peak = max(top or 0, max(totals.values(), default=0), 1)
    width = CHART_WIDTH / buckets
    order = {status: n for n, status in enumerate(RunStatus)}
    filled: dict[int, float] = {}
    bars: list[Bar] = []
    for count in sorted(counts, key=lambda c: (c.bucket, order[c.status])):
        if not 0 <= count.bucket < buckets or count.count <= 0:
            continue
        height = CHART_HEIGHT * count.count / peak
        below = filled.get(count.bucket, 0.0)
        filled[count.bucket] = below + height
        bars.append(
            Bar(
                x=count.bucket * width,
                y=max(CHART_HEIGHT - below - height, 0.0),
                width=max(width - 0.2, 0.1) if width > 0.4 else width,
                height=height,
                tone=count.status.value,
                title=f"{count.count} {count.status.value} {label}",
            )
        )
    return bars


@dataclass(frozen=True)
class Level:
    """One value of a limited key: its holders and waiters now, and its limit."""

    value: str
    holders: int
    waiters: int
    limit: int
    runs: tuple[Slot, ...]


def levels(slots: Sequence[Slot], shown: int) -> tuple[list[Level], list[Bar]]:
    """Holders and waiters per value (``list_key_slots`` order), and their horizontal bars.

    Each value is one row: holders (green) from the left, then waiters
    (amber); the scale is the largest row's total. At most ``shown`` values.
    """
    grouped: dict[str, list[Slot]] = {}
    for slot in slots:
        grouped.setdefault(format_value(slot.value), []).append(slot)
    found = [
        Level(
            value=value,
            holders=sum(1 for s in rows if s.holding),
            waiters=sum(1 for s in rows if not s.holding),
            limit=max((s.limit for s in rows), default=0),
            runs=tuple(rows),
        )
        for value, rows in list(grouped.items())[:shown]
    ]
    peak = max((level.holders + level.waiters for level in found), default=0) or 1
    bars: list[Bar] = []
    for n, level in enumerate(found):
        y = n * 20.0 + 2
        held = CHART_WIDTH * level.holders / peak
        waiting = CHART_WIDTH * level.waiters / peak
        bars.append(Bar(0.0, y, held, 16.0, "holders", f"{level.value}: {level.holders} holding"))
        bars.append(
            Bar(held, y, waiting, 16.0, "waiters", f"{level.value}: {level.waiters} waiting")
        )
    return found, bars
