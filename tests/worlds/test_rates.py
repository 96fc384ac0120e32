"""The rate-limit rule (``worlds/_rules/rates.py``): no sliding window ever holds more
than ``limit`` tokens, whatever the sequence of starts, delays and moves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds._rules import rates, runs, starts
from worlds._rules.rates import Token, Window
from worlds.types import RunStarted

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _window(
    tokens: list[Token], limit: int, per: float, now: datetime, not_before: datetime | None
) -> Window:
    """What the flow reads (``worlds._flows.rates.window``), from a list of all tokens."""
    span = timedelta(seconds=per)
    live = [t for t in tokens if t.at > now - span]
    newest = sorted(live, key=lambda t: t.at, reverse=True)[:limit]
    since = max(now, not_before or now) - span
    count = rates.early_count(limit)
    early = sorted((t for t in live if t.at > since), key=lambda t: t.at)[:count]
    return Window(newest, early, len(early) < count)


def _most_in_a_window(times: list[datetime], per: float) -> int:
    span = timedelta(seconds=per)
    return max((sum(1 for o in times if t - span < o <= t) for t in times), default=0)


steps = st.lists(
    st.tuples(
        st.integers(0, 4),  # what: 0-1 a start, 2 a delayed start, 3 a move, 4 a priority start
        st.floats(0, 3),  # seconds the clock moves first
        st.floats(0, 8),  # a delay
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(1, 4), per=st.floats(0.5, 5), plan=steps)
def test_no_window_ever_holds_more_than_limit(
    limit: int, per: float, plan: list[tuple[int, float, float]]
) -> None:
    now, counter = T0, 0
    tokens: list[Token] = []
    for what, moves, delay in plan:
        now += timedelta(seconds=moves)
        future = [t for t in tokens if t.at > now]
        if what == 3 and future:
            mine = future[len(future) // 2]
            others = [t for t in tokens if t is not mine]
            desired = now + timedelta(seconds=delay)
            found = _window(others, limit, per, now, desired)
            at = starts.new_start(mine.at, [("k", found, limit, per)], desired, now)
            assert at >= desired or at == mine.at
            tokens = [*others, Token(at, mine.run_id, limit, per)]
        else:
            not_before = now + timedelta(seconds=delay) if what == 2 else None
            found = _window(tokens, limit, per, now, not_before)
            at, _ = rates.next_token("k", "v", found, limit, per, now, not_before)
            assert at >= (not_before or now)
            counter += 1
            name = f"r{counter}"
            if what == 4:  # a lower number passes the waiting runs (priority 1 each)
                reserved = [rates.Reserved(t.at, t.run_id, 1) for t in future]
                reserved.sort(key=lambda r: r.at)
                at, passed = rates.by_priority(at, 0, reserved, not_before)
                moved = {r.run_id: place for r, place in passed}
                tokens = [Token(moved.get(t.run_id, t.at), t.run_id, limit, per) for t in tokens]
            tokens.append(Token(at, name, limit, per))
        assert _most_in_a_window([t.at for t in tokens], per) <= limit


@settings(max_examples=300, deadline=None)
@given(
    limit=st.integers(1, 4),
    per=st.floats(0.5, 5),
    plan=st.lists(
        st.tuples(
            st.floats(0, 2),  # seconds the clock moves before this start
            st.floats(0, 30),  # how late a worker begins the run after its admission
        ),
        max_size=40,
    ),
)
def test_recorded_starts_keep_the_window_however_late_workers_are(
    limit: int, per: float, plan: list[tuple[float, float]]
) -> None:
    """Each run's ``RunStarted`` is stamped (``runs.stamped``) when a worker begins it,
    at its token's time or any later, in any order: the recorded starts are the
    admissions, so no window of them holds more than ``limit``; a run without a rate
    is dated when it begins."""
    now, tokens, begins = T0, list[Token](), []
    for n, (moves, lag) in enumerate(plan):
        now += timedelta(seconds=moves)
        at, _ = rates.next_token("k", "v", _window(tokens, limit, per, now, None), limit, per, now)
        tokens.append(Token(at, f"r{n}", limit, per))
        begins.append(at + timedelta(seconds=lag))
    recorded = []
    for token, began in sorted(zip(tokens, begins, strict=True), key=lambda pair: pair[1]):
        record = runs.new_run(token.run_id, "wf", {}, token.at, admitted_at=token.at)
        record, stored = runs.stamped(record, RunStarted(), began)
        assert stored.at == record.started_at == token.at
        recorded.append(stored.at)
        plain = runs.new_run(f"plain-{token.run_id}", "wf", {}, token.at)
        plain, unlimited = runs.stamped(plain, RunStarted(), began)
        assert unlimited.at == plain.started_at == began
    assert _most_in_a_window(recorded, per) <= limit


@settings(max_examples=200, deadline=None)
@given(limit=st.integers(1, 4), per=st.floats(0.5, 5), gaps=st.lists(st.floats(0, 2), max_size=30))
def test_starts_that_come_now_are_served_in_arrival_order(
    limit: int, per: float, gaps: list[float]
) -> None:
    """Without delayed starts, each token is no earlier than the one before it."""
    now = T0
    tokens: list[Token] = []
    for index, gap in enumerate(gaps):
        now += timedelta(seconds=gap)
        at, _ = rates.next_token("k", "v", _window(tokens, limit, per, now, None), limit, per, now)
        assert not tokens or at >= tokens[-1].at
        tokens.append(Token(at, f"r{index}", limit, per))


def test_a_delayed_token_leaves_the_places_before_it() -> None:
    later = Token(T0 + timedelta(hours=1), "delayed", 1, 60.0)
    at, by = rates.next_token("k", "v", _window([later], 1, 60.0, T0, None), 1, 60.0, T0)
    assert (at, by) == (T0, None)


def test_another_rate_is_refused_while_the_pair_is_live() -> None:
    token = Token(T0, "r1", 2, 60.0)
    with pytest.raises(ValueError, match="one rate at a time"):
        rates.next_token("k", "v", _window([token], 3, 60.0, T0, None), 3, 60.0, T0)
    later = T0 + timedelta(seconds=61)
    at, _ = rates.next_token("k", "v", _window([token], 3, 60.0, later, None), 3, 60.0, later)
    assert at == later
