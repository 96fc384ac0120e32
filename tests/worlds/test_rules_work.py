"""``worlds._rules.work``: where a new item goes and when its enqueuer leases it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from worlds._rules import runs, work
from worlds.types import NewWorkItem, StepStarted

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
RUN = runs.new_run("r1", "orders", {}, NOW)


def _place(new: NewWorkItem) -> work.Placement:
    return work.place(
        RUN, "item", new, now=NOW, worker_id="w", lease_seconds=30, new_token=lambda: 7
    )


def test_an_item_not_asked_for_stays_free_and_due_now() -> None:
    placed = _place(NewWorkItem(kind="step", name="charge", number=2))
    assert placed == work.Placement("item", "charge", NOW, None, 0, None, None, None)


def test_a_workflow_item_is_named_after_the_run_workflow() -> None:
    assert _place(NewWorkItem(kind="workflow", name="ignored")).name == "orders"


def test_an_item_asked_for_but_not_yet_due_is_not_leased() -> None:
    later = NOW + timedelta(seconds=1)
    placed = _place(NewWorkItem(kind="step", number=1, lease=True, available_at=later))
    assert placed.leased is None and placed.owner is None and placed.available_at == later


def test_a_due_step_asked_for_is_leased_and_started() -> None:
    placed = _place(NewWorkItem(kind="step", name="charge", number=3, attempt=2, lease=True))
    assert placed.owner == "w" and placed.token == 7
    assert placed.expires_at == NOW + timedelta(seconds=30)
    assert placed.leased is not None
    assert (placed.leased.id, placed.leased.run_id, placed.leased.token) == ("item", "r1", 7)
    assert placed.leased.lease_expires_at == placed.expires_at
    assert placed.started == StepStarted(step=3, attempt=2)


def test_a_leased_timer_starts_no_step() -> None:
    placed = _place(NewWorkItem(kind="timer", number=1, lease=True))
    assert placed.leased is not None and placed.started is None
