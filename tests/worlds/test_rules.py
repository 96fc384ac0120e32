"""The world rules of ``worlds._rules``, driven by synthetic inputs (no world, no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worlds._rules import cancel, claims, commits, requests, runs, terms
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ClaimConflict,
    CommitRequest,
    CreateRunRequest,
    EventKind,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunStarted,
    RunStatus,
    StartPolicy,
    StepCompleted,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
STATUSES = st.sampled_from(list(RunStatus))
RUN_IDS = st.sampled_from(["r1", "r2", "r3"])
STEPS = st.none() | st.integers(min_value=1, max_value=3)
HELD = st.none() | st.builds(
    claims.HeldClaim,
    st.none() | RUN_IDS,
    st.integers(min_value=1, max_value=10**6),
    STEPS,
    lapses_at=st.none(),
    pruned_status=st.none(),
)
POLICIES = st.builds(
    StartPolicy,
    key=st.just("k"),
    conflict=st.sampled_from(["fail", "terminate_existing"]),
    reuse=st.sampled_from(["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]),
)


def _set(step: int | None) -> AttributeSet:
    return AttributeSet(key="k", value="v", unique=True, step=step, attempt=1 if step else None)


# ------------------------------------------------------------------ claims


NOW = datetime(2026, 1, 1, tzinfo=UTC)


@given(HELD)
def test_a_new_holder_always_gets_one_more_generation(held: claims.HeldClaim | None) -> None:
    generation = claims.next_generation(held)
    assert generation == (1 if held is None else held.generation + 1)


@given(HELD, RUN_IDS, STEPS)
def test_generations_only_grow_or_stay_with_their_holder(
    held: claims.HeldClaim | None, run_id: str, step: int | None
) -> None:
    outcome = claims.on_attribute_set(held, run_id, _set(step), NOW)
    if isinstance(outcome, AttributeConflict):
        assert held is not None and held.run_id is not None
        assert (held.run_id, held.step) != (run_id, step)
        assert outcome.holder_run_id == held.run_id
    elif held is not None and held.run_id == run_id and held.step == step:
        assert outcome == held.generation
    else:
        assert outcome == claims.next_generation(held)
        assert held is None or outcome > held.generation


@given(HELD, RUN_IDS, STEPS)
def test_only_the_holder_itself_claims_again(
    held: claims.HeldClaim | None, run_id: str, step: int | None
) -> None:
    again = claims.claims_again(held, run_id, _set(step), NOW)
    outcome = claims.on_attribute_set(held, run_id, _set(step), NOW)
    assert again == (
        held is not None
        and not claims.is_free(held, NOW)
        and (held.run_id, held.step) == (run_id, step)
    )
    if again:
        assert held is not None and outcome == held.generation


def test_a_released_pair_is_claimed_again_at_the_next_generation() -> None:
    assert claims.on_attribute_set(claims.HeldClaim(None, 4), "r1", _set(None), NOW) == 5
    assert claims.on_attribute_set(None, "r1", _set(2), NOW) == 1


@given(POLICIES, STATUSES, st.integers(min_value=1, max_value=10**6))
def test_a_takeover_follows_the_policy_and_gives_one_more_generation(
    policy: StartPolicy, status: RunStatus, generation: int
) -> None:
    taken = claims.on_create(policy, "k", "v", ("holder", generation), status, "new")
    if claims.may_take_over(policy, status):
        assert isinstance(taken, claims.Takeover)
        assert taken.generation == generation + 1
        superseded = None if status.is_closed else "superseded by run new"
        assert taken.cancel_reason == superseded
    else:
        assert taken == ClaimConflict(
            key="k", value="v", holder_run_id="holder", holder_status=status
        )


@given(st.none() | POLICIES, st.none() | STATUSES)
def test_only_the_policy_key_is_ever_taken_over(
    policy: StartPolicy | None, status: RunStatus | None
) -> None:
    other = claims.on_create(policy, "other", 1, ("holder", 1), status, "new")
    assert isinstance(other, ClaimConflict)
    if policy is None:
        own = claims.on_create(policy, "k", 1, ("holder", 1), status, "new")
        assert isinstance(own, ClaimConflict)


def test_a_claim_whose_holder_is_gone_is_taken_by_the_policy_key() -> None:
    policy = StartPolicy(key="k")
    assert claims.on_create(policy, "k", 1, ("gone", 3), None, "new") == claims.Takeover(4, None)


def test_reuse_rules_for_closed_holders() -> None:
    only_failed = StartPolicy(key="k", reuse="allow_duplicate_failed_only")
    assert claims.may_take_over(only_failed, RunStatus.FAILED)
    assert claims.may_take_over(only_failed, RunStatus.CANCELLED)
    assert not claims.may_take_over(only_failed, RunStatus.COMPLETED)
    assert not claims.may_take_over(StartPolicy(key="k"), RunStatus.RUNNING)
    terminate = StartPolicy(key="k", conflict="terminate_existing")
    assert claims.may_take_over(terminate, RunStatus.RUNNING)


# ------------------------------------------------------------------ requests


@given(STATUSES, st.none() | STATUSES)
def test_release_frees_a_tombstone_or_a_closed_holders_claim_only(
    status: RunStatus, pruned: RunStatus | None
) -> None:
    """Issue 33, item 16: ``on_release`` never takes a pair from an open holder."""
    assert claims.on_release(None, None, NOW) == "free"
    assert claims.on_release(claims.HeldClaim(None, 3), None, NOW) == "free"
    lapsed = claims.HeldClaim("r1", 2, lapses_at=NOW - timedelta(seconds=1))
    assert claims.on_release(lapsed, status, NOW) == "free"
    held = claims.HeldClaim("r1", 2, pruned_status=pruned)
    expected = "release" if pruned is not None or status.is_closed else "open"
    assert claims.on_release(held, status, NOW) == expected
    assert claims.on_release(held, None, NOW) == "release"  # the holder is gone


def test_unique_keys_need_a_value_with_one_message() -> None:
    request = CreateRunRequest(run_id="r", workflow="w", args=b"", unique=frozenset({"a", "b"}))
    with pytest.raises(ValueError, match=r"unique keys \['a', 'b'\] are not among the run's"):
        requests.check_create(request)


def test_the_policy_key_must_be_unique() -> None:
    request = CreateRunRequest(
        run_id="r",
        workflow="w",
        args=b"",
        attributes={"a": 1},
        unique=frozenset({"a"}),
        policy=StartPolicy(key="b"),
    )
    with pytest.raises(ValueError, match="the policy's key 'b' is not among the unique keys"):
        requests.check_create(request)


def test_a_consistent_request_passes() -> None:
    request = CreateRunRequest(
        run_id="r",
        workflow="w",
        args=b"",
        attributes={"a": 1},
        unique=frozenset({"a"}),
        policy=StartPolicy(key="a"),
    )
    requests.check_create(request)
    assert "already exists" in str(requests.run_exists("r"))
    assert "names an existing run r" in str(requests.successor_exists("r"))


# ------------------------------------------------------------------ runs


def test_a_new_run_is_pending_after_its_created_event() -> None:
    record = runs.new_run("r", "w", {"a": 1}, NOW)
    created = runs.created_event("w", b"args", {"a": 1}, NOW)
    assert (record.status, record.last_seq, record.created_at) == (RunStatus.PENDING, 1, NOW)
    assert (created.seq, created.at, created.args) == (1, NOW, b"args")
    assert record.attributes == created.attributes == {"a": 1}


def test_the_deadline_timer_exists_only_with_a_timeout() -> None:
    assert runs.deadline_item(CreateRunRequest(run_id="r", workflow="w", args=b"")) is None
    later = NOW + timedelta(hours=1)
    item = runs.deadline_item(
        CreateRunRequest(run_id="r", workflow="w", args=b"", timeout_at=later)
    )
    assert item is not None
    assert (item.kind, item.number, item.available_at) == (
        "timer",
        runs.RUN_DEADLINE_TIMER,
        later,
    )


def test_stamping_numbers_events_and_moves_the_status() -> None:
    record = runs.new_run("r", "w", {}, NOW)
    record, started = runs.stamped(record, RunStarted(), NOW)
    assert (started.seq, record.status, record.started_at) == (2, RunStatus.RUNNING, NOW)
    record, _ = runs.stamped(record, AttributeSet(key="a", value=2), NOW)
    record, _ = runs.stamped(record, AttributeSet(key="b", value=3, step=1, attempt=1), NOW)
    assert record.attributes == {"a": 2}
    record, done = runs.stamped(record, RunCompleted(result=b"x"), NOW)
    assert (done.seq, record.status, record.result, record.closed_at) == (
        5,
        RunStatus.COMPLETED,
        b"x",
        NOW,
    )


@given(st.lists(st.sampled_from(["started", "step", "attr"]), max_size=20))
def test_sequence_numbers_count_the_events(kinds: list[str]) -> None:
    record = runs.new_run("r", "w", {}, NOW)
    events: dict[str, EventKind] = {
        "started": RunStarted(),
        "step": StepCompleted(step=1, attempt=1, result=b""),
        "attr": AttributeSet(key="a", value=1),
    }
    for n, kind in enumerate(kinds, start=2):
        record, stored = runs.stamped(record, events[kind], NOW)
        assert stored.seq == record.last_seq == n


# ------------------------------------------------------------------ cancel


@given(STATUSES, st.floats(min_value=0, max_value=3600))
def test_the_cancel_plan_follows_the_status(status: RunStatus, grace: float) -> None:
    plan = cancel.plan_cancel(status, "w", "why", NOW, grace)
    if status is RunStatus.PENDING:
        assert plan == cancel.CancelPlan(RunCancelled(reason="why"))
    elif status is RunStatus.RUNNING:
        deadline = NOW + timedelta(seconds=grace)
        assert plan.event == RunCancelRequested(reason="why", deadline=deadline)
        assert plan.timer is not None
        assert (plan.timer.number, plan.timer.available_at) == (
            cancel.CANCEL_DEADLINE_TIMER,
            deadline,
        )
    else:
        assert plan == cancel.CancelPlan(None)
    assert (cancel.cancel_now(status, "why") is None) == status.is_closed


def test_only_steps_in_flight_are_discarded() -> None:
    discard = cancel.discarded("step", 3, 2, True)
    assert discard is not None and (discard.step, discard.attempt) == (3, 2)
    assert cancel.discarded("step", 3, 2, False) is None
    assert cancel.discarded("timer", 3, 1, True) is None


# ------------------------------------------------------------------ commits


def test_refused_commits() -> None:
    assert commits.closed(RunStatus.FAILED).events == ()
    assert not commits.closed(RunStatus.FAILED).ok
    lost = commits.lost(RunStatus.RUNNING, "w-2")
    assert (lost.ok, lost.lease_lost, lost.lease_holder) == (False, True, "w-2")


def test_an_ack_rewakes_only_a_woken_workflow_item() -> None:
    assert commits.after_ack("workflow", True) == "rewake"
    assert commits.after_ack("workflow", False) == "delete"
    assert commits.after_ack("step", True) == "delete"


def test_successors_are_the_continued_run_ids() -> None:
    request = CommitRequest(
        run_id="r", worker_id="w", events=(RunContinued(next_run_id="n", args=b""),)
    )
    assert commits.successors(request) == ["n"]


# ------------------------------------------------------------------ terms


@given(st.integers() | st.floats(allow_nan=False) | st.text() | st.booleans() | st.none())
def test_index_terms_keep_the_type(value: object) -> None:
    term = terms.index_value(value)  # type: ignore[arg-type]
    assert term[1] == ":" and term[0] in "nbifs"
    if isinstance(value, bool):
        assert term in ("b:0", "b:1")


def test_datetimes_index_as_utc_instants() -> None:
    local = datetime(2026, 1, 1, 12, tzinfo=UTC).astimezone(timezone(timedelta(hours=5)))
    assert terms.index_value(local) == terms.index_value(datetime(2026, 1, 1, 12, tzinfo=UTC))


def _drive(
    request: CommitRequest, held: tuple[str, bool] | None
) -> tuple[list[commits.Need], commits.Committed]:
    """Run ``commit_flow`` against a world that settles every claim and leases nothing."""
    run, _ = runs.stamped(runs.new_run("r", "w", {}, NOW), RunStarted(), NOW)
    flow = commits.commit_flow(run, request, NOW, held)
    needs: list[commits.Need] = []

    def do(need: commits.Need) -> object:
        needs.append(need)
        if isinstance(need, commits.Settle):
            return need.event
        if isinstance(need, commits.Enqueue):
            return (need.run, None)
        return None

    return needs, commits.drive(flow, do)


def test_a_commit_settles_claims_numbers_events_then_acks_and_enqueues() -> None:
    claim = AttributeSet(key="k", value=1, unique=True)
    request = CommitRequest(
        run_id="r",
        worker_id="w",
        events=(StepCompleted(step=1, attempt=1, result=b""), claim),
        schedule=(NewWorkItem(kind="workflow"),),
    )
    needs, done = _drive(request, ("workflow", False))
    kinds = [type(need).__name__ for need in needs]
    assert kinds == ["Append", "Settle", "Append", "Ack", "Enqueue"]
    assert [event.seq for event in done.result.events] == [3, 4]
    assert done.run.last_seq == 4 and done.attributes == {"k": 1}
    assert needs[3] == commits.Ack("delete")


@given(st.booleans(), st.booleans())
def test_a_commit_that_closes_its_run_acks_and_enqueues_nothing(ack: bool, rewake: bool) -> None:
    request = CommitRequest(
        run_id="r",
        worker_id="w",
        events=(RunCompleted(result=b""),),
        schedule=(NewWorkItem(kind="workflow"),),
        ack=ack,
    )
    needs, done = _drive(request, ("workflow", rewake))
    assert [type(need) for need in needs] == [commits.Append]
    assert done.result.ok and done.result.status is RunStatus.COMPLETED


def test_a_continued_run_is_started_right_after_its_event() -> None:
    request = CommitRequest(
        run_id="r", worker_id="w", events=(RunContinued(next_run_id="n", args=b""),)
    )
    needs, done = _drive(request, None)
    assert [type(need) for need in needs] == [commits.Append, commits.Continue]
    assert done.run.status is RunStatus.CONTINUED
