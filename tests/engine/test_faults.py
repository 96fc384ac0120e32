"""How the worker logs a world in trouble: an outage is a few lines, not thousands."""

from __future__ import annotations

import logging

import pytest

from workflow.engine._faults import Complaints
from worlds.errors import WorldUnavailableError


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
