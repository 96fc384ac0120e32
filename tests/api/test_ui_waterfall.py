"""The waterfall's layout: a pure function from a run's events to rows of bars.

Hypothesis feeds it any sequence of the event kinds it draws (in any order,
with times before the start or out of order, as a damaged or odd log may
hold): every bar stays inside the axis, none has a negative width, and every
event is accounted for exactly once, whatever page is drawn.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from workflow.ui._waterfall import AXIS, LABEL, draw, layout
from worlds.types import (
    AttributeSet,
    ChildClosed,
    ChildStarted,
    ErrorInfo,
    EventKind,
    HookCreated,
    HookReceived,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StepStarted,
    WaitCompleted,
    WaitCreated,
)

ORIGIN = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
ERROR = ErrorInfo("RuntimeError", "boom")


def _at(seconds: float) -> datetime:
    return ORIGIN + timedelta(seconds=seconds)


def _event(kind: str, n: int, seconds: float, seq: int) -> EventKind:
    at = _at(seconds)
    child = f"child-{n}"
    made: dict[str, EventKind] = {
        "created": RunCreated(seq=seq, at=at, workflow="w", args=b""),
        "step_created": StepCreated(seq=seq, at=at, step=n, name=f"s{n}", args=b""),
        "step_started": StepStarted(seq=seq, at=at, step=n, attempt=1),
        "step_completed": StepCompleted(seq=seq, at=at, step=n, attempt=1, result=b""),
        "step_retrying": StepRetrying(seq=seq, at=at, step=n, attempt=1, error=ERROR, retry_at=at),
        "step_failed": StepFailed(seq=seq, at=at, step=n, attempt=2, error=ERROR),
        "wait_created": WaitCreated(seq=seq, at=at, wait=n, until=at),
        "wait_completed": WaitCompleted(seq=seq, at=at, wait=n),
        "hook_created": HookCreated(seq=seq, at=at, hook=n, token=f"t{n}"),
        "hook_received": HookReceived(seq=seq, at=at, hook=n, payload=b""),
        "slot_requested": SlotRequested(
            seq=seq, at=at, hold=n, key="k", value="v", limit=1, acquired=n % 2 == 0
        ),
        "slot_refused": SlotRequested(
            seq=seq, at=at, hold=n, key="k", value="v", limit=1, refused=1
        ),
        "slot_acquired": SlotAcquired(seq=seq, at=at, hold=n),
        "slot_released": SlotReleased(seq=seq, at=at, hold=n),
        "child_started": ChildStarted(seq=seq, at=at, child=n, run_id=child, workflow="c"),
        "child_closed": ChildClosed(seq=seq, at=at, run_id=child, status=RunStatus.COMPLETED),
        "child_continued": ChildClosed(
            seq=seq, at=at, run_id=child, status=RunStatus.CONTINUED, next_run_id=f"child-{n + 1}"
        ),
        "attribute": AttributeSet(seq=seq, at=at, key="order", value="o-1", unique=True),
        "completed": RunCompleted(seq=seq, at=at, result=b""),
        "continued": RunContinued(seq=seq, at=at, next_run_id="next", args=b""),
    }
    return made[kind]


KINDS = st.sampled_from(
    [
        "created", "step_created", "step_started", "step_completed", "step_retrying",
        "step_failed", "wait_created", "wait_completed", "hook_created", "hook_received",
        "slot_requested", "slot_refused", "slot_acquired", "slot_released",
        "child_started", "child_closed", "child_continued", "attribute", "completed",
        "continued",
    ]
)  # fmt: skip
LOGS = st.lists(
    st.tuples(KINDS, st.integers(1, 6), st.floats(-10, 1000, allow_nan=False)), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(LOGS, st.floats(0, 2000), st.integers(1, 8), st.integers(-2, 20))
def test_every_bar_is_inside_the_axis_and_every_event_is_drawn(
    log: list[tuple[str, int, float]], now: float, per_page: int, page: int
) -> None:
    events = [_event(kind, n, seconds, seq) for seq, (kind, n, seconds) in enumerate(log, 1)]
    waterfall = layout(events, ORIGIN, _at(now), page=page, rows_per_page=per_page)
    assert sorted(waterfall.seqs()) == [event.seq for event in events]
    assert waterfall.span >= 0
    assert 0 <= waterfall.page < waterfall.pages
    assert len(waterfall.rows) <= per_page + 2  # the window and two folded summaries
    assert sum(row.folded or 1 for row in waterfall.rows) == waterfall.total_rows
    for row in waterfall.rows:
        for segment in row.segments:
            assert 0 <= segment.start <= segment.end <= waterfall.span
    for bar in draw(waterfall):
        assert bar.width >= 0
        assert bar.x >= LABEL and bar.x + bar.width <= LABEL + AXIS + 1e-9


def test_retries_are_separate_segments_and_failures_are_marked() -> None:
    events: list[EventKind] = [
        RunCreated(seq=1, at=_at(0), workflow="w", args=b""),
        StepCreated(seq=2, at=_at(0), step=1, name="charge", args=b""),
        StepStarted(seq=3, at=_at(0), step=1, attempt=1),
        StepRetrying(seq=4, at=_at(1), step=1, attempt=1, error=ERROR, retry_at=_at(2)),
        StepStarted(seq=5, at=_at(2), step=1, attempt=2),
        StepFailed(seq=6, at=_at(3), step=1, attempt=2, error=ERROR),
        WaitCreated(seq=7, at=_at(3), wait=1, until=_at(9)),
    ]
    waterfall = layout(events, ORIGIN, _at(10))
    step, timer = waterfall.rows
    assert step.label == "1. charge"
    assert [(s.start, s.end, s.outcome) for s in step.segments] == [
        (0, 1, "retry"),
        (2, 3, "failed"),
    ]
    assert [(s.start, s.end, s.outcome) for s in timer.segments] == [(3, 10, "open")]
    assert waterfall.span == 10  # an open run's axis reaches now


def test_three_thousand_steps_are_drawn_a_page_at_a_time() -> None:
    events: list[EventKind] = [RunCreated(seq=1, at=_at(0), workflow="w", args=b"")]
    for n in range(1, 3001):
        events.append(StepStarted(seq=2 * n, at=_at(n), step=n, attempt=1))
        events.append(StepCompleted(seq=2 * n + 1, at=_at(n + 0.5), step=n, attempt=1, result=b""))
    waterfall = layout(events, ORIGIN, _at(4000), page=10, rows_per_page=60)
    assert waterfall.total_rows == 3000 and waterfall.pages == 50 and waterfall.page == 10
    before, *window, after = waterfall.rows
    assert (before.kind, before.folded, after.folded) == ("folded", 600, 3000 - 660)
    assert [row.label for row in window][:2] == ["601. step", "602. step"]
    assert sorted(waterfall.seqs()) == [event.seq for event in events]
