"""The flow-control rules: slots (admit, promotion) and reuse windows, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worlds._rules import claims, slots
from worlds.types import ClaimConflict, CreateRunRequest, Limit, RunStatus

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _request(on_full: str = "queue", limit: int = 2) -> CreateRunRequest:
    return CreateRunRequest(
        run_id="new",
        workflow="wf",
        args=b"",
        attributes={"tenant": "acme"},
        limits={"tenant": Limit(limit=limit, on_full=on_full)},  # type: ignore[arg-type]
    )


@given(st.integers(0, 5), st.integers(0, 3), st.sampled_from(["queue", "fail"]))
def test_admit_holds_only_with_room_and_nobody_waiting(
    holding: int, waiting: int, on_full: str
) -> None:
    state = slots.PairState(holding, waiting, "h" if holding else ("w" if waiting else None))
    decided = slots.admit(_request(on_full), {"tenant": state})
    if holding < 2 and waiting == 0:
        assert decided == "hold"
    elif on_full == "fail":
        assert isinstance(decided, ClaimConflict) and decided.limit == 2
        assert decided.holder_run_id == state.someone
    else:
        assert decided == "wait"


class _Pairs:
    """A tiny world for ``promote_flow``: pairs of holders and ordered waiters."""

    def __init__(self, limit: int, holders: dict[str, list[str]], lines: dict[str, list[str]]):
        self.limit, self.holders, self.lines = limit, holders, lines

    def do(self, need: slots.Need) -> Any:
        if isinstance(need, slots.Head):
            line = self.lines[need.pair[0]]
            return (line[0], 0) if line else None
        if isinstance(need, slots.Views):
            return [
                slots.PairView((key, ""), self.limit, len(self.holders[key]), (line[0], 0))
                for key, line in self.lines.items()
                if need.run_id in line
            ]
        for key, _ in need.pairs:
            self.lines[key].remove(need.run_id)
            self.holders[key].append(need.run_id)
        return None


@given(st.integers(1, 4), st.integers(0, 4), st.integers(0, 8))
def test_promotion_fills_free_slots_in_arrival_order(limit: int, held: int, waiting: int) -> None:
    held = min(held, limit)
    line = [f"w{n}" for n in range(waiting)]
    world = _Pairs(limit, {"a": [f"h{n}" for n in range(held)]}, {"a": list(line)})
    promoted = slots.drive(slots.promote_flow([("a", "")]), world.do)
    assert promoted == line[: limit - held]
    assert len(world.holders["a"]) == min(limit, held + waiting)


def test_a_waiter_in_two_pairs_blocks_only_behind_itself() -> None:
    world = _Pairs(1, {"a": [], "b": ["hb"]}, {"a": ["both", "x"], "b": ["both"]})
    assert slots.drive(slots.promote_flow([("a", "")]), world.do) == []
    world.holders["b"] = []
    assert slots.drive(slots.promote_flow([("b", "")]), world.do) == ["both"]
    assert world.lines == {"a": ["x"], "b": []}


@given(
    st.sampled_from([RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED]),
    st.none() | st.floats(0, 10**6),
    st.frozensets(st.sampled_from([RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED])),
)
def test_a_closing_holder_releases_dates_or_keeps_its_claim(
    status: RunStatus, ttl: float | None, release_on: frozenset[RunStatus]
) -> None:
    fate = claims.on_close(status, NOW, ttl, release_on)
    if status in release_on:
        assert fate == "release"
    elif ttl is not None:
        assert fate == NOW + timedelta(seconds=ttl)
    else:
        assert fate is None


def test_a_claim_is_free_released_or_once_it_lapsed() -> None:
    assert claims.is_free(None, NOW)
    assert claims.is_free(claims.HeldClaim(None, 3), NOW)
    assert not claims.is_free(claims.HeldClaim("r", 3), NOW)
    assert claims.is_free(claims.HeldClaim("r", 3, lapses_at=NOW), NOW)
    later = NOW + timedelta(seconds=1)
    assert not claims.is_free(claims.HeldClaim("r", 3, lapses_at=later), NOW)
    tombstone = claims.HeldClaim("r", 3, pruned_status=RunStatus.FAILED)
    assert not claims.is_free(tombstone, NOW)


def test_release_on_round_trips_through_its_column() -> None:
    statuses = frozenset({RunStatus.FAILED, RunStatus.CANCELLED})
    assert claims.encode_release_on(statuses) == "cancelled,failed"
    assert claims.decode_release_on("cancelled,failed") == statuses
    assert claims.encode_release_on(frozenset()) is None
    assert claims.decode_release_on(None) == frozenset()


@given(st.integers(0, 5), st.integers(0, 3), st.integers(1, 4))
def test_a_hold_takes_a_slot_only_with_room_and_nobody_waiting(
    holding: int, waiting: int, limit: int
) -> None:
    acquired = slots.admit_hold(slots.PairState(holding, waiting, None), limit)
    assert acquired == (holding < limit and waiting == 0)


def test_holds_of_one_run_in_two_pairs_are_promoted_independently() -> None:
    """A waiter is (run, hold): a run waiting in two pairs by two holds needs no
    slot of the other pair, unlike a start-time waiter (hold 0) in both."""
    lines: dict[tuple[str, str], list[slots.Waiter]] = {
        ("a", ""): [("r", 1)],
        ("b", ""): [("r", 2)],
    }
    holders: dict[tuple[str, str], list[slots.Waiter]] = {("a", ""): [], ("b", ""): [("h", 0)]}
    promoted: list[slots.Waiter] = []

    def do(need: slots.Need) -> Any:
        if isinstance(need, slots.Head):
            return lines[need.pair][0] if lines[need.pair] else None
        if isinstance(need, slots.Views):
            me = (need.run_id, need.hold)
            return [
                slots.PairView(pair, 1, len(holders[pair]), line[0])
                for pair, line in lines.items()
                if me in line
            ]
        for pair in need.pairs:
            lines[pair].remove((need.run_id, need.hold))
            holders[pair].append((need.run_id, need.hold))
        promoted.append((need.run_id, need.hold))
        return None

    assert slots.drive(slots.promote_flow([("a", ""), ("b", "")]), do) == ["r"]
    assert promoted == [("r", 1)]
    assert lines == {("a", ""): [], ("b", ""): [("r", 2)]}
