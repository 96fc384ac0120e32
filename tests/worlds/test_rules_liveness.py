"""The liveness rule (``worlds._rules.liveness``), on times chosen by hand: a stall of
every heartbeat declares nobody dead, a steady witness does, and the window and the
steady gap are where the RFC puts them. The kit (``LivenessConformance``) checks the
same on every world with the machine's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worlds._rules import liveness
from worlds.memory import MemoryWorld
from worlds.types import WorkerInfo

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WINDOW = 2.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def worker(worker_id: str, window: float = WINDOW) -> liveness.Beat:
    info = WorkerInfo(id=worker_id, host="h", pid=1, liveness_seconds=window)
    return liveness.register(info, T0)


def beats(start: liveness.Beat, times: list[float]) -> liveness.Beat:
    for moment in times:
        start = liveness.beat(start, at(moment), 0)
    return start


def test_a_holder_is_dead_once_a_steady_witness_beat_a_window_past_its_last_beat() -> None:
    holder = beats(worker("h"), [0.5])
    witness = beats(worker("w"), [0.5 * n for n in range(1, 5)])  # 0.5 .. 2.0
    assert not liveness.is_dead(holder, [holder, witness]), "a window past 0.5 is 2.5"
    witness = liveness.beat(witness, at(2.5), 0)
    assert liveness.is_dead(holder, [holder, witness])
    assert liveness.status(holder, [holder, witness], at(2.5)) == "dead"
    assert liveness.may_take(holder, [holder, witness], at(1.0))


def test_a_stall_of_every_heartbeat_declares_nobody_dead() -> None:
    """Both beat until 1 s, nobody beats for 10 s (a frozen world); the witness's
    first beats after it start a new steady run, which reaches a window only at 13 s."""
    holder = beats(worker("h"), [0.5, 1.0])
    witness = beats(worker("w"), [0.5, 1.0, 11.0, 11.5, 12.0, 12.5])
    assert witness.steady_since == at(11.0)
    assert not liveness.is_dead(holder, [holder, witness])
    assert liveness.status(holder, [holder, witness], at(12.5)) == "silent"
    assert not liveness.may_take(holder, [holder, witness], at(1.1))
    holder = liveness.beat(holder, at(12.6), 3)  # back: a live holder keeps its items
    witness = beats(witness, [13.0, 13.5, 14.0])
    assert not liveness.is_dead(holder, [holder, witness])
    assert liveness.status(holder, [holder, witness], at(14.0)) == "live"


def test_an_item_its_live_holder_forgot_is_taken_a_window_after_its_lease_ran_out() -> None:
    """A holder that beats steadily but stopped renewing an item (it dropped it after
    an error) loses that item once its own beats reach a window past the lease's end;
    it stays live, and a stall in between restarts the count."""
    holder = beats(worker("h"), [0.5 * n for n in range(1, 6)])  # 0.5 .. 2.5
    assert not liveness.may_take(holder, [holder], at(1.0)), "2.5 is not a window past 1.0"
    holder = liveness.beat(holder, at(3.0), 0)
    assert liveness.may_take(holder, [holder], at(1.0))
    assert liveness.status(holder, [holder], at(3.0)) == "live"
    stalled = beats(worker("h"), [0.5, 8.0, 8.5, 9.0, 9.5])  # nobody beat from 0.5 to 8
    assert not liveness.may_take(stalled, [stalled], at(1.0))


def test_a_gap_over_half_the_window_restarts_the_steady_run() -> None:
    witness = beats(worker("w"), [1.0])
    assert witness.steady_since == T0, "a gap of exactly half the window keeps it"
    witness = liveness.beat(witness, at(2.01), 0)
    assert witness.steady_since == at(2.01)


def test_a_witness_with_a_longer_window_proves_nothing() -> None:
    holder = beats(worker("h"), [0.5])
    slow = beats(worker("w", window=10.0), [float(n) for n in range(1, 20)])
    assert not liveness.is_dead(holder, [holder, slow])


def test_nobody_witnesses_for_itself_and_unregistered_or_stopped_holders_follow_the_timer() -> None:
    alone = beats(worker("h"), [0.5 * n for n in range(1, 20)])
    assert not liveness.is_dead(alone, [alone])
    assert liveness.may_take(None, [alone], at(1))
    assert liveness.may_take(alone._replace(stopped=True), [alone], at(1))
    assert liveness.status(alone._replace(stopped=True), [], at(1)) == "stopped"
    assert liveness.status(alone._replace(fenced=True), [], at(1)) == "dead"


@given(
    gaps=st.lists(st.floats(min_value=0.0, max_value=WINDOW / 2), min_size=1, max_size=40),
    offsets=st.lists(st.floats(min_value=0.0, max_value=WINDOW / 2), min_size=1, max_size=40),
)
def test_a_holder_beating_every_half_window_is_never_dead(
    gaps: list[float], offsets: list[float]
) -> None:
    """Whatever the witness does, a holder whose beats are never more than half a
    window apart (the world answering both throughout) is never declared dead."""
    holder, witness = worker("h"), worker("w")
    now = 0.0
    for n, gap in enumerate(gaps):
        now += gap
        holder = liveness.beat(holder, at(now), 0)
        witness = liveness.beat(witness, at(now + offsets[n % len(offsets)] / 2), 0)
        assert not liveness.is_dead(holder, [holder, witness])


@pytest.mark.anyio
async def test_rows_of_workers_gone_for_a_day_are_dropped_at_the_next_registration() -> None:
    moments = [T0]
    world = MemoryWorld(clock=lambda: moments[-1])
    async with world:
        await world.register_worker(WorkerInfo(id="old", host="h", pid=1))
        moments.append(T0 + liveness.RETENTION + timedelta(seconds=1))
        await world.register_worker(WorkerInfo(id="new", host="h", pid=2))
        assert [record.id for record in await world.list_workers()] == ["new"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
