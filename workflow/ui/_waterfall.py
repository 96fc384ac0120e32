"""A run's waterfall: its event log laid out as bars on one time axis.

``layout`` is a pure function from a run's events to rows of segments: one
row per step (each attempt a segment, so retries show as separate bars), per
timer, hook wait, hold (its wait, then its holding) and child run. Events that
are no span (the run's start and end, attributes and claims, a cancel request,
a continue-as-new) are marks on the axis. Every event lands in exactly one
segment or mark, so nothing of the log is silently dropped.

A run of 3,000 steps would be 3,000 rows: only a window of ``rows_per_page``
rows is drawn, and the rows before and after it are each folded into one
summary row spanning their extent, with links to page (``?wpage=N``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ChildClosed,
    ChildConflict,
    ChildStarted,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunFailed,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
)

__all__ = [
    "AXIS",
    "LABEL",
    "ROWS_PER_PAGE",
    "ROW_HEIGHT",
    "Bar",
    "Mark",
    "Row",
    "Segment",
    "Waterfall",
    "draw",
    "layout",
    "svg_context",
]

ROWS_PER_PAGE = 60
"""Rows of bars drawn at once; the rest are folded into two summary rows."""
LABEL = 260
"""Width of the label column of the SVG, in its user units."""
AXIS = 700
"""Width of the time axis of the SVG, in its user units (the SVG scales to the page)."""
ROW_HEIGHT = 18
"""Height of one row of the SVG, in its user units."""
MIN_BAR = 1.5
"""The narrowest bar drawn (an instant would be invisible), kept inside the axis."""


@dataclass(frozen=True)
class Segment:
    """One bar: ``start`` and ``end`` are seconds from the run's start, inside the axis.

    ``outcome`` is ``ok``, ``retry``, ``failed``, ``cancelled`` or ``open`` (still
    going: the bar reaches the axis' end, which is now for an open run).
    """

    start: float
    end: float
    outcome: str
    label: str
    seqs: tuple[int, ...]


@dataclass(frozen=True)
class Row:
    """One line of the waterfall: a step, a timer, a hook, a hold, a child, or a
    summary of ``folded`` rows outside the window (``kind == "folded"``)."""

    kind: str
    label: str
    segments: tuple[Segment, ...]
    folded: int = 0


@dataclass(frozen=True)
class Mark:
    """An instant on the axis: the run's start or end, an attribute or claim, a
    conflict, a cancel request, a continue-as-new."""

    at: float
    kind: str
    label: str
    seq: int


@dataclass(frozen=True)
class Waterfall:
    """The laid-out waterfall: the drawn ``rows`` (window and folded summaries),
    the ``marks``, the axis length ``span`` in seconds, and the paging facts."""

    rows: tuple[Row, ...]
    marks: tuple[Mark, ...]
    span: float
    total_rows: int
    page: int
    pages: int

    def seqs(self) -> list[int]:
        """Every event sequence number the drawing accounts for (folded rows included)."""
        found = [seq for row in self.rows for segment in row.segments for seq in segment.seqs]
        return found + [mark.seq for mark in self.marks]


@dataclass
class _Open:
    """A row being built: its closed segments and the span still open."""

    kind: str
    label: str
    order: float
    segments: list[Segment] = field(default_factory=list)
    started: float | None = None
    start_seqs: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    """Events of the row that belong to no span (a step's creation before its attempt)."""
    waiting: bool = False
    """The open span is a wait (for a slot), not a holding."""


class _Builder:
    def __init__(self, origin: datetime, end: float) -> None:
        self.origin = origin
        self.end = end
        self.rows: dict[tuple[str, object], _Open] = {}
        self.marks: list[Mark] = []

    def offset(self, moment: datetime) -> float:
        seconds = (moment - self.origin).total_seconds()
        return min(max(seconds, 0.0), self.end)

    def row(self, kind: str, ident: object, label: str, at: float) -> _Open:
        found = self.rows.get((kind, ident))
        if found is None:
            found = self.rows[(kind, ident)] = _Open(kind, label, at)
        return found

    def begin(self, row: _Open, at: float, seqs: Sequence[int]) -> None:
        """Open a span on ``row`` at ``at``; one still open there was cut short (an
        attempt whose worker was lost, started again) and closes as a retry."""
        if row.started is not None:
            start = min(row.started, at)
            cut = Segment(start, at, "retry", "interrupted, started again", tuple(row.start_seqs))
            row.segments.append(cut)
        row.started = at
        row.start_seqs = [*row.pending, *seqs]
        row.pending = []

    def close(self, row: _Open, at: float, seq: int, outcome: str, label: str) -> None:
        """Close ``row``'s open span at ``at`` (a span of no length if none is open)."""
        began = row.started if row.started is not None else at
        start = min(began, at)
        seqs = (*row.start_seqs, *row.pending, seq)
        row.segments.append(Segment(start, at, outcome, label, seqs))
        row.started, row.start_seqs, row.pending = None, [], []

    def instant(self, row: _Open, at: float, seq: int, outcome: str, label: str) -> None:
        """An event of a row with no span of its own (a refused child, say)."""
        row.segments.append(Segment(at, at, outcome, label, (seq,)))

    def finish(self) -> list[Row]:
        done: list[Row] = []
        for row in sorted(self.rows.values(), key=lambda r: r.order):
            if row.started is not None:
                start = min(row.started, self.end)
                label = "waiting" if row.waiting or row.kind != "step" else "running"
                row.segments.append(
                    Segment(start, self.end, "open", label, (*row.start_seqs, *row.pending))
                )
            elif row.pending:  # created, never started: a mark where it was created
                at = min(row.order, self.end)
                row.segments.append(Segment(at, at, "open", "not started", tuple(row.pending)))
            done.append(Row(row.kind, row.label, tuple(row.segments)))
        return done


def _step_event(b: _Builder, event: EventKind, names: dict[int, str], at: float) -> bool:
    """Lay out a step event on its step's row; False if ``event`` is no step event."""
    if isinstance(event, StepCreated):
        names[event.step] = event.name
        b.row("step", event.step, f"{event.step}. {event.name}", at).pending.append(event.seq)
        return True
    if not isinstance(event, (StepStarted, StepCompleted, StepRetrying, StepFailed, StepDiscarded)):
        return False
    label = f"{event.step}. {names.get(event.step, 'step')}"
    row = b.row("step", event.step, label, at)
    if isinstance(event, StepStarted):
        b.begin(row, at, [event.seq])
    elif isinstance(event, StepCompleted):
        b.close(row, at, event.seq, "ok", f"attempt {event.attempt}")
    elif isinstance(event, StepRetrying):
        b.close(row, at, event.seq, "retry", f"attempt {event.attempt}: {event.error.message}")
    elif isinstance(event, StepFailed):
        b.close(row, at, event.seq, "failed", f"attempt {event.attempt}: {event.error.message}")
    else:
        b.close(row, at, event.seq, "cancelled", f"attempt {event.attempt}: {event.outcome}")
    return True


def _wait_event(b: _Builder, event: EventKind, at: float, children: dict[str, int]) -> bool:
    """Lay out a timer, hook, hold or child event; False if ``event`` is none of them."""
    if isinstance(event, WaitCreated):
        b.begin(b.row("timer", event.wait, f"timer {event.wait}", at), at, [event.seq])
    elif isinstance(event, WaitCompleted):
        b.close(b.row("timer", event.wait, f"timer {event.wait}", at), at, event.seq, "ok", "fired")
    elif isinstance(event, HookCreated):
        b.begin(b.row("hook", event.hook, f"hook {event.token}", at), at, [event.seq])
    elif isinstance(event, HookReceived):
        row = b.row("hook", event.hook, f"hook {event.token}", at)
        b.close(row, at, event.seq, "ok", "received")
    elif isinstance(event, HookConflict):
        row = b.row("hook", event.hook, f"hook {event.token}", at)
        b.instant(row, at, event.seq, "failed", f"token held by {event.holder_run_id}")
    elif isinstance(event, SlotRequested):
        row = b.row("hold", event.hold, f"hold {event.key}={event.value}", at)
        if event.refused is not None:
            b.instant(row, at, event.seq, "failed", f"refused: {event.refused} hold it")
        else:  # a wait for a slot, or (acquired at once) the holding itself
            b.begin(row, at, [event.seq])
            row.waiting = not event.acquired
    elif isinstance(event, SlotAcquired):
        row = b.row("hold", event.hold, f"hold {event.hold}", at)
        b.close(row, at, event.seq, "wait", "waited for a slot")
        b.begin(row, at, [])
        row.waiting = False
    elif isinstance(event, SlotReleased):
        b.close(b.row("hold", event.hold, f"hold {event.hold}", at), at, event.seq, "ok", "held")
    elif isinstance(event, ChildStarted):
        children[event.run_id] = event.child
        row = b.row("child", event.child, f"child {event.workflow} {event.run_id}", at)
        b.begin(row, at, [event.seq])
    elif isinstance(event, ChildConflict):
        row = b.row("child", event.child, f"child {event.run_id}", at)
        b.instant(row, at, event.seq, "failed", f"{event.key}={event.value} held")
    elif isinstance(event, ChildClosed):
        number = children.get(event.run_id, -1)
        row = b.row("child", number, f"child {event.run_id}", at)
        outcome = {
            RunStatus.COMPLETED: "ok",
            RunStatus.FAILED: "failed",
            RunStatus.CANCELLED: "cancelled",
        }.get(event.status, "ok")
        if event.next_run_id is not None:  # waits on, for the run it continued as
            children[event.next_run_id] = number
            b.close(row, at, event.seq, "retry", f"continued as {event.next_run_id}")
            b.begin(row, at, [])
        else:
            b.close(row, at, event.seq, outcome, event.status.value)
    else:
        return False
    return True


_MARKS: dict[type, str] = {
    RunCompleted: "good",
    RunFailed: "bad",
    RunCancelled: "cancel",
    RunContinued: "continued",
    AttributeSet: "attribute",
    AttributeConflict: "bad",
}


def _mark_label(event: EventKind) -> str:
    if isinstance(event, AttributeSet):
        claim = f" (claim, generation {event.generation})" if event.unique else ""
        return f"{event.key}={event.value}{claim}"
    if isinstance(event, AttributeConflict):
        return f"{event.key}={event.value} held by {event.holder_run_id}"
    if isinstance(event, RunContinued):
        return f"continued as {event.next_run_id}"
    return str(type(event).__struct_config__.tag)


def _fold(rows: Sequence[Row], label: str) -> Row:
    start = min((s.start for r in rows for s in r.segments), default=0.0)
    end = max((s.end for r in rows for s in r.segments), default=start)
    failed = any(s.outcome == "failed" for r in rows for s in r.segments)
    seqs = tuple(seq for r in rows for s in r.segments for seq in s.seqs)
    outcome = "failed" if failed else "folded"
    return Row("folded", label, (Segment(start, end, outcome, label, seqs),), folded=len(rows))


def layout(
    events: Sequence[EventKind],
    origin: datetime,
    now: datetime,
    *,
    page: int = 0,
    rows_per_page: int = ROWS_PER_PAGE,
) -> Waterfall:
    """Lay out ``events`` (one run's log, in order) on an axis from ``origin``.

    The axis ends at the last event, or at ``now`` while the run is open (so
    what still runs reaches the present). Times before ``origin`` or after the
    axis' end are clamped onto it. ``page`` picks the window of rows drawn
    (clamped to the pages there are).

    Raises:
        ValueError: ``rows_per_page`` is below 1.
    """
    if rows_per_page < 1:
        raise ValueError(f"rows_per_page must be at least 1, got {rows_per_page}")
    closed = any(
        isinstance(e, (RunCompleted, RunFailed, RunCancelled, RunContinued)) for e in events
    )
    last = max((e.at for e in events), default=origin)
    end_at = last if closed else max(last, now)
    span = max((end_at - origin).total_seconds(), 0.0)
    b = _Builder(origin, span)
    names: dict[int, str] = {}
    children: dict[str, int] = {}
    for event in events:
        at = b.offset(event.at)
        if _step_event(b, event, names, at) or _wait_event(b, event, at, children):
            continue
        kind = _MARKS.get(type(event), "event")
        b.marks.append(Mark(at, kind, _mark_label(event), event.seq))
    rows = b.finish()
    pages = max(1, -(-len(rows) // rows_per_page))
    page = min(max(page, 0), pages - 1)
    first, last_row = page * rows_per_page, (page + 1) * rows_per_page
    window = list(rows[first:last_row])
    if first:
        window.insert(0, _fold(rows[:first], f"{first} rows before"))
    if rows[last_row:]:
        window.append(_fold(rows[last_row:], f"{len(rows) - last_row} rows after"))
    return Waterfall(tuple(window), tuple(b.marks), span, len(rows), page, pages)


@dataclass(frozen=True)
class Bar:
    """A rectangle of the SVG (user units): a segment, or a mark's tick (``row == -1``)."""

    x: float
    y: float
    width: float
    tone: str
    title: str
    row: int


def _x(waterfall: Waterfall, seconds: float) -> float:
    if waterfall.span <= 0:
        return float(LABEL)
    return LABEL + AXIS * min(max(seconds / waterfall.span, 0.0), 1.0)


def draw(waterfall: Waterfall) -> list[Bar]:
    """The SVG rectangles of ``waterfall``: each inside the axis, none of negative width.

    A segment's bar is at least ``MIN_BAR`` wide (an instant stays visible),
    moved left if it would overrun the axis' end.
    """
    bars: list[Bar] = []
    for number, row in enumerate(waterfall.rows):
        y = number * ROW_HEIGHT + 3
        for segment in row.segments:
            left = _x(waterfall, segment.start)
            width = max(_x(waterfall, segment.end) - left, MIN_BAR)
            left = min(left, LABEL + AXIS - width)
            bars.append(Bar(left, y, width, segment.outcome, segment.label, number))
    for mark in waterfall.marks:
        left = min(_x(waterfall, mark.at), LABEL + AXIS - MIN_BAR)
        bars.append(Bar(left, 0.0, MIN_BAR, mark.kind, mark.label, -1))
    return bars


def svg_context(waterfall: Waterfall, ticks: int = 6) -> dict[str, Any]:
    """What ``templates/waterfall.html`` draws: the bars, the axis ticks, the sizes."""
    height = max(len(waterfall.rows), 1) * ROW_HEIGHT
    marks = [
        {
            "x": round(_x(waterfall, waterfall.span * n / ticks), 2),
            "seconds": waterfall.span * n / ticks,
        }
        for n in range(ticks + 1)
    ]
    return {
        "wf_bars": draw(waterfall),
        "wf_ticks": marks,
        "wf_label": LABEL,
        "wf_width": LABEL + AXIS,
        "wf_row": ROW_HEIGHT,
        "wf_axis_y": height,
        "wf_height": height + 18,
    }
