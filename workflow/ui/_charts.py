"""Charts of the web UI, drawn on the server as SVG: runs per minute, slots per value.

Pure functions from counts to rectangles (``Bar``), which the templates
write as ``<rect>`` elements coloured by class (the Content-Security-Policy
allows no inline style): ``stacked`` for runs started or closed per bucket
and status (``World.count_runs``), ``levels`` for holders and waiters per
value of a limited key now (``World.list_key_slots``), ``tracks`` for the same
over time, one strip per value (``World.slot_history``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from workflow.views import format_value
from worlds.query import RunCount
from worlds.types import RunStatus, Slot, SlotSample

__all__ = [
    "CHART_HEIGHT",
    "CHART_WIDTH",
    "TRACK_HEIGHT",
    "Bar",
    "Level",
    "Track",
    "bucket_totals",
    "levels",
    "stacked",
    "tracks",
    "value_label",
]

CHART_WIDTH = 960
"""Width of a chart's plot, in SVG user units (the SVG scales to the page)."""
CHART_HEIGHT = 120
"""Height of a chart's plot, in SVG user units."""
TRACK_HEIGHT = 40
"""Height of one value's strip in the flow view's history, in SVG user units."""


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


@dataclass(frozen=True)
class Track:
    """One value's strip in the flow view's history: its bars and the most it saw."""

    value: str
    peak_holders: int
    peak_waiters: int
    bars: list[Bar]


def value_label(ivalue: str) -> str:
    """An indexed value as people read it: ``s:acme`` is ``acme``, ``i:5`` is ``5``."""
    _, _, text = ivalue.partition(":")
    return text


def _levels_per_bucket(
    samples: Sequence[SlotSample], since: datetime, width: int, buckets: int
) -> list[tuple[int, int]]:
    """One pair's (holders, waiters) peak per bucket, oldest first.

    A bucket's peak is the most its samples saw, and at least the level the
    bucket opened at (the pair stands as its previous sample left it until
    the next one): a pair held all hour with one sample before the window
    shows held in every bucket.
    """
    levels: list[tuple[int, int]] = []
    standing = (0, 0)
    ordered = sorted(samples, key=lambda s: s.minute)
    n = 0
    while n < len(ordered) and ordered[n].minute < since:
        standing = (ordered[n].holders, ordered[n].waiters)
        n += 1
    for bucket in range(buckets):
        peak_h, peak_w = standing
        end = (bucket + 1) * width
        while n < len(ordered) and (ordered[n].minute - since).total_seconds() < end:
            sample = ordered[n]
            peak_h, peak_w = max(peak_h, sample.peak_holders), max(peak_w, sample.peak_waiters)
            standing = (sample.holders, sample.waiters)
            n += 1
        levels.append((peak_h, peak_w))
    return levels


def tracks(
    samples: Sequence[SlotSample], since: datetime, width: int, buckets: int, shown: int
) -> list[Track]:
    """Holders and waiters per value per bucket of ``width`` seconds from ``since``.

    Each value is a strip of ``TRACK_HEIGHT``: per bucket a bar of the most
    holders (green) with the most waiters (amber) above it, all strips on one
    scale (the largest bucket's total). The ``shown`` values that saw the most
    come first; a value that saw nobody in the window is left out.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    by_value: dict[str, list[SlotSample]] = {}
    for sample in samples:
        by_value.setdefault(sample.ivalue, []).append(sample)
    found = []
    for ivalue, rows in by_value.items():
        levels = _levels_per_bucket(rows, since, width, buckets)
        top_h, top_w = max(h for h, _ in levels), max(w for _, w in levels)
        if top_h or top_w:
            found.append((ivalue, levels, top_h, top_w))
    found.sort(key=lambda f: (-(f[2] + f[3]), f[0]))
    found = found[:shown]
    scale = max((h + w for _, levels, _, _ in found for h, w in levels), default=0) or 1
    step = CHART_WIDTH / buckets
    bar = max(step - 0.2, 0.1) if step > 0.4 else step
    result = []
    for n, (ivalue, levels, top_h, top_w) in enumerate(found):
        label = value_label(ivalue)
        base = (n + 1) * TRACK_HEIGHT - 2.0
        room = TRACK_HEIGHT - 14.0  # the value's name sits above its bars
        bars: list[Bar] = []
        for bucket, (held, waiting) in enumerate(levels):
            x = bucket * step
            held_h, wait_h = room * held / scale, room * waiting / scale
            if held:
                bars.append(
                    Bar(x, base - held_h, bar, held_h, "holders", f"{label}: {held} holding")
                )
            if waiting:
                title = f"{label}: {waiting} waiting"
                bars.append(Bar(x, base - held_h - wait_h, bar, wait_h, "waiters", title))
        result.append(Track(label, top_h, top_w, bars))
    return result
