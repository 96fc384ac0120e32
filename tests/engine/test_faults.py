"""How the worker logs a world in trouble: an outage is a few lines, not thousands."""

from __future__ import annotations

import logging

import pytest

from workflow.engine._faults import Complaints, is_fatal, is_transient
from worlds.errors import WorldDeadlockError, WorldFullError, WorldUnavailableError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "test.faults"]


def test_an_outage_is_logged_when_it_begins_every_ten_seconds_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    complaints = Complaints(logging.getLogger("test.faults"), "w-1", clock=clock)
    caplog.set_level(logging.INFO)
    down = WorldUnavailableError("PostgreSQL: the database system is starting up")
    for tick in range(250):  # 25 s of outage, 100 steps failing every 0.1 s
        clock.now = tick / 10
        for step in range(100):
            complaints.failed(f"commit step 'add' #{step} of run r-{step}", down, 0.25)
    complaints.succeeded()
    records = lines(caplog)
    assert len(records) == 4  # begins, still after 10 s, still after 20 s, ends
    assert "unavailable" in records[0].getMessage()
    assert records[0].exc_info is not None  # the first traceback only
    assert all(r.exc_info is None for r in records[1:])
    assert "still unavailable after 10.0 s" in records[1].getMessage()
    assert "answers again after 24.9 s (25000 calls failed" in records[3].getMessage()
    complaints.succeeded()  # no outage open: nothing more
    assert len(lines(caplog)) == 4


def test_other_failures_are_one_line_each_with_one_traceback_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    complaints = Complaints(logging.getLogger("test.faults"), "w-1", clock=FakeClock())
    caplog.set_level(logging.INFO)
    for step in range(5):
        complaints.failed(f"commit step #{step}", ValueError("bad value"), 0.1)
    complaints.failed("commit step #9", ValueError("bad value"), None)
    records = lines(caplog)
    assert len(records) == 6
    assert [r.exc_info is not None for r in records] == [True] + [False] * 5
    assert records[-1].getMessage().endswith("giving up")


def test_a_later_outage_begins_afresh_after_healthy_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Twenty healthy seconds between two outages: the second one's first line says it
    begins, not "still unavailable after 26 s"."""
    clock = FakeClock()
    complaints = Complaints(logging.getLogger("test.faults"), "w-1", clock=clock)
    caplog.set_level(logging.INFO)
    down = WorldUnavailableError("SQLite: database is locked")
    complaints.failed("fire schedules", down, 0.25)
    clock.now = 6.0
    complaints.succeeded("fire schedules")
    clock.now = 26.0
    complaints.failed("fire schedules", down, 0.25)
    messages = [r.getMessage() for r in lines(caplog)]
    assert len(messages) == 3
    assert "answers again after 6.0 s" in messages[1]
    assert "the world is unavailable (could not fire schedules)" in messages[2]


def test_an_outage_ends_on_a_call_of_its_kind_or_after_a_quiet_spell(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A full world still renews leases (rows rewritten in place) while commits fail:
    a renewal does not end the outage while commits keep failing; a commit does, and
    so does any call once nothing has failed for a while."""
    clock = FakeClock()
    complaints = Complaints(logging.getLogger("test.faults"), "w-1", clock=clock)
    caplog.set_level(logging.INFO)
    full = WorldFullError("SQLite: database or disk is full")
    for tick in range(30):
        clock.now = float(tick)
        complaints.failed("commit step 's' #1 of run r-1", full, 1.0)
        complaints.succeeded("renew its leases")
        complaints.succeeded("lease work")
    complaints.succeeded("commit step 's' #1 of run r-1")
    messages = [r.getMessage() for r in lines(caplog)]
    assert len(messages) == 4, messages  # full, still after 10 s and 20 s, room again
    assert "the world is full (could not commit step" in messages[0]
    assert "keeping its leases" in messages[0]
    assert "still full after 10.0 s" in messages[1]
    assert "has room again after 29.0 s (30 calls failed" in messages[3]
    complaints.failed("commit step 's' #2 of run r-1", full, 1.0)  # idle afterwards
    clock.now += 16.0
    complaints.succeeded("lease work")
    assert "has room again after 16.0 s" in lines(caplog)[-1].getMessage()


def test_a_deadlock_is_named_and_is_no_outage(caplog: pytest.LogCaptureFixture) -> None:
    complaints = Complaints(logging.getLogger("test.faults"), "w-1", clock=FakeClock())
    caplog.set_level(logging.INFO)
    deadlock = WorldDeadlockError("PostgreSQL deadlock (...): deadlock detected")
    complaints.failed("commit step #1", deadlock, 0.05)
    complaints.succeeded("commit step #1")
    messages = [r.getMessage() for r in lines(caplog)]
    assert len(messages) == 1
    assert "WorldDeadlockError" in messages[0] and "retrying in 0.05 s" in messages[0]
    assert "unavailable" not in messages[0]
    assert is_transient(deadlock) and is_fatal(deadlock) is None
    assert is_transient(WorldFullError("full")) and is_fatal(WorldFullError("full")) is None
