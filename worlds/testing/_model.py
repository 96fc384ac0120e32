"""A hypothesis state machine that drives a world next to a tiny in-Python model.

Rules create runs (some claiming a pair at creation, with or without a reuse
window, some under a start
policy that may take a claim over, some taking a slot of a limited pair or
waiting for one), claim pairs in commits, move runs through their statuses,
cancel them, prune closed runs (keeping their claims as tombstones, or
releasing them and every earlier tombstone) and release pairs one by one
(``release_claim``: a closed or pruned holder's only); after every step the world's claims (with
their generations), slots (holders and waiters in order), statuses, run
attributes and listing must agree with the model.

The machine runs in a worker thread (hypothesis is synchronous) and reaches the
world on the test's own event loop through ``anyio.from_thread``, so the world
is opened once, by the ``world`` fixture, on the loop it belongs to. Examples
share the world's storage; each example works under its own random prefix.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, TypeVar, TypeVarTuple

import anyio
import anyio.from_thread
import anyio.to_thread
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.semantics import index_value
from worlds.testing._base import ConformanceBase, new_run_id
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CreateRunRequest,
    Debounce,
    ErrorInfo,
    EventKind,
    Limit,
    ReuseWindow,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStatus,
    StartPolicy,
    utcnow,
)

__all__ = ["ModelConformance"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

_KEYS = 2
_LIMITS = (1, 2, 2)
"""The limit of each limited key of the model (``lk0``, ``lk1``, ``lk2``)."""
_VALUES: tuple[str | int, ...] = ("a", "b", 7)
_KEYED = 2
"""The limited key the model gives a key limit (``set_key_limit``) at times."""
_BURSTS = (0, 0, 1)
"""The burst of each value of ``lk2`` (by value index): 7 may take one slot more."""
_WEIGHTS: dict[AttributeValue, float] = {"a": 2.0}

_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=list(HealthCheck),
)

_TRANSITIONS: dict[str, tuple[EventKind, RunStatus]] = {
    "start": (RunStarted(), RunStatus.RUNNING),
    "complete": (RunCompleted(result=b"done"), RunStatus.COMPLETED),
    "fail": (RunFailed(error=ErrorInfo(type="E", message="boom")), RunStatus.FAILED),
    "cancel": (RunCancelled(reason="model"), RunStatus.CANCELLED),
}


def _call(function: Callable[[*_Ts], Coroutine[Any, Any, _T]], *args: *_Ts) -> _T:
    """Run ``function(*args)`` on the event loop of the test that started this thread."""
    return anyio.from_thread.run(function, *args)


def _machine(world: World) -> type[RuleBasedStateMachine]:
    """A state machine class bound to ``world`` (reached from a worker thread)."""

    class WorldModel(RuleBasedStateMachine):
        """Runs and claims as the world should have them."""

        def __init__(self) -> None:
            super().__init__()
            self.prefix = uuid.uuid4().hex[:12]
            self.workflow = f"model-{self.prefix}"
            self.statuses: dict[str, RunStatus] = {}
            self.claims: dict[tuple[int, int], str] = {}
            self.generations: dict[tuple[int, int], int] = {}
            self.attributes: dict[str, dict[str, AttributeValue]] = {}
            self.holders: dict[tuple[int, int], list[str]] = {}
            self.waiters: dict[tuple[int, int], list[str]] = {}
            self.slot_of: dict[str, tuple[int, int]] = {}
            self.windows: dict[tuple[int, int], ReuseWindow] = {}
            self.tombstones: dict[str, RunStatus] = {}
            self.key_limit: int | None = None
            """The limit of ``lk2`` over all its values (``None``: none)."""
            self.passes: dict[int, float] = {}
            self.vtime = 0.0
            self.touched: set[str] = set()
            """Runs whose log holds more than ``RunCreated`` (a debounce no longer updates them)."""

        def holder_status(self, holder: str) -> RunStatus:
            return self.tombstones.get(holder) or self.statuses[holder]

        def conflict(self, name: str, value: str | int, holder: str) -> ClaimConflict:
            return ClaimConflict(
                key=name,
                value=value,
                holder_run_id=holder,
                holder_status=self.holder_status(holder),
                holder_pruned=holder in self.tombstones,
            )

        def close_claims(self, run_id: str, status: RunStatus) -> None:
            """``run_id`` closed with ``status``: apply its claims' reuse windows."""
            for pair, holder in list(self.claims.items()):
                window = self.windows.get(pair)
                if holder != run_id or window is None:
                    continue
                if status in window.release_on or window.ttl == 0:
                    del self.claims[pair]
                    del self.windows[pair]  # the window went with the claim it governed

        def limited_pair(self, key: int, value: int) -> tuple[str, str | int]:
            return f"{self.prefix}-lk{key}", _VALUES[value]

        def closed(self, run_id: str) -> None:
            """``run_id`` closed: its slot or place goes, and waiters move up in order."""
            pair = self.slot_of.pop(run_id, None)
            if pair is None:
                return
            holders, waiters = self.holders[pair], self.waiters[pair]
            if run_id in holders:
                holders.remove(run_id)
            else:
                waiters.remove(run_id)
            self.move_up(pair[0])

        def key_held(self) -> int:
            return sum(len(h) for (k, _), h in self.holders.items() if k == _KEYED)

        def serve(self, value: int) -> None:
            """Stride scheduling: the value served moves on by 1 / its weight."""
            start = max(self.passes.get(value, 0.0), self.vtime)
            self.passes[value] = start + 1.0 / _WEIGHTS.get(_VALUES[value], 1.0)
            self.vtime = start

        def move_up(self, key: int) -> None:
            """Waiters of ``key`` take the slots free now: first in first out per pair;
            for ``lk2`` under a key limit, values by weighted round-robin (those under
            their own limit before a burst slot, then by pass: a value entered the
            line at the key's virtual time or its own pass, whichever is later;
            equal passes by index text)."""
            if key != _KEYED or self.key_limit is None:
                for (k, _), waiters in self.waiters.items():
                    holders = self.holders[(k, _)]
                    while k == key and waiters and len(holders) < _LIMITS[k]:
                        holders.append(waiters.pop(0))
                return
            while self.key_held() < self.key_limit:
                room = [
                    v
                    for (k, v), waiters in self.waiters.items()
                    if k == key and waiters and len(self.holders[(k, v)]) < _LIMITS[k] + _BURSTS[v]
                ]
                if not room:
                    return
                value = min(
                    room,
                    key=lambda v: (
                        len(self.holders[(key, v)]) >= _LIMITS[key],
                        self.passes.get(v, 0.0),
                        index_value(_VALUES[v]),
                    ),
                )
                self.holders[(key, value)].append(self.waiters[(key, value)].pop(0))
                self.serve(value)

        @rule(limit=st.sampled_from([None, 1, 2, 3]))
        def limit_key(self, limit: int | None) -> None:
            """``lk2`` gets a key limit, another one, or none; whom it admits moves up."""
            name, _ = self.limited_pair(_KEYED, 0)
            stored = _call(world.set_key_limit, name, limit, _WEIGHTS if limit else None)
            assert (None if stored is None else stored.limit) == limit
            if limit is None:
                self.passes.clear()
                self.vtime = 0.0
            self.key_limit = limit
            self.move_up(_KEYED)

        @rule(
            key=st.integers(0, len(_LIMITS) - 1),
            value=st.integers(0, len(_VALUES) - 1),
            fail=st.booleans(),
        )
        def create_limited(self, key: int, value: int, fail: bool) -> None:
            """A start into a limited pair: a slot, a place in line, or a refusal."""
            name, held_value = self.limited_pair(key, value)
            run_id = new_run_id()
            burst = _BURSTS[value] if key == _KEYED else 0
            limit = Limit(limit=_LIMITS[key], on_full="fail" if fail else "queue", burst=burst)
            request = CreateRunRequest(
                run_id=run_id,
                workflow=self.workflow,
                args=b"",
                attributes={name: held_value},
                limits={name: limit},
            )
            result = _call(world.create_run, request)
            holders = self.holders.setdefault((key, value), [])
            waiters = self.waiters.setdefault((key, value), [])
            keyed = key == _KEYED and self.key_limit is not None
            key_full = keyed and self.key_held() >= (self.key_limit or 0)
            cap = limit.limit + burst if keyed and not key_full else limit.limit
            at_cap = len(holders) >= cap
            full = at_cap or bool(waiters) or key_full
            if full and fail:
                # A refusal names a holder: the pair's when its slots are all held,
                # else the key's (its line is there because the key is full).
                assert result.run is None and result.conflict is not None, result
                if at_cap:
                    assert result.conflict.holder_run_id in holders
                    assert result.conflict.limit == limit.limit
                else:
                    keyed_holders = {
                        run for (k, _), runs in self.holders.items() if k == _KEYED for run in runs
                    }
                    assert result.conflict.holder_run_id in keyed_holders, result.conflict
                    assert result.conflict.limit == self.key_limit
                return
            assert result.conflict is None and result.run is not None, result
            if keyed and full and not waiters:  # the value enters the key's line
                self.passes[value] = max(self.passes.get(value, 0.0), self.vtime)
            (waiters if full else holders).append(run_id)
            if keyed and not full:
                self.serve(value)
            self.slot_of[run_id] = (key, value)
            self.statuses[run_id] = RunStatus.PENDING
            self.attributes[run_id] = {name: held_value}

        def pair(self, key: int, value: int) -> tuple[str, str | int]:
            return f"{self.prefix}-k{key}", _VALUES[value]

        def pick(self, index: int) -> str:
            return list(self.statuses)[index % len(self.statuses)]

        @rule(
            key=st.integers(0, _KEYS - 1),
            value=st.integers(0, len(_VALUES) - 1),
            unique=st.booleans(),
            window=st.none()
            | st.builds(
                ReuseWindow,
                ttl=st.sampled_from([None, 0.0, 3600.0]),
                release_on=st.frozensets(
                    st.sampled_from([RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.COMPLETED])
                ),
            ),
        )
        def create(self, key: int, value: int, unique: bool, window: ReuseWindow | None) -> None:
            name, held_value = self.pair(key, value)
            run_id = new_run_id()
            windowed = unique and window is not None
            request = CreateRunRequest(
                run_id=run_id,
                workflow=self.workflow,
                args=b"",
                attributes={name: held_value},
                unique=frozenset({name}) if unique else frozenset(),
                windows={name: window} if windowed and window is not None else {},
            )
            result = _call(world.create_run, request)
            holder = self.claims.get((key, value)) if unique else None
            if holder is not None:
                assert result.run is None
                assert result.conflict == self.conflict(name, held_value, holder)
                return
            assert result.conflict is None and result.run is not None
            assert result.run.status == RunStatus.PENDING
            self.statuses[run_id] = RunStatus.PENDING
            self.attributes[run_id] = {name: held_value}
            if unique:
                self.take(key, value, run_id)
                self.windows.pop((key, value), None)
                if window is not None:
                    self.windows[(key, value)] = window

        def take(self, key: int, value: int, run_id: str) -> None:
            """``run_id`` claims the pair anew: its generation goes up by one."""
            self.claims[(key, value)] = run_id
            self.generations[(key, value)] = self.generations.get((key, value), 0) + 1

        @rule(
            key=st.integers(0, _KEYS - 1),
            value=st.integers(0, len(_VALUES) - 1),
            conflict=st.sampled_from(["fail", "use_existing", "terminate_existing"]),
            reuse=st.sampled_from(
                ["allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate"]
            ),
        )
        def start_with_policy(self, key: int, value: int, conflict: str, reuse: str) -> None:
            """A start under a Temporal policy: the table of the policies RFC, row by row."""
            name, held_value = self.pair(key, value)
            run_id = new_run_id()
            request = CreateRunRequest(
                run_id=run_id,
                workflow=self.workflow,
                args=b"",
                attributes={name: held_value},
                unique=frozenset({name}),
                policy=StartPolicy(key=name, conflict=conflict, reuse=reuse),  # type: ignore[arg-type]
            )
            result = _call(world.create_run, request)
            holder = self.claims.get((key, value))
            if holder is None:
                takes_over = True
            elif not self.holder_status(holder).is_closed:
                takes_over = conflict == "terminate_existing"
            elif reuse == "allow_duplicate_failed_only":
                takes_over = self.holder_status(holder) in (RunStatus.FAILED, RunStatus.CANCELLED)
            else:
                takes_over = reuse == "allow_duplicate"
            if not takes_over:
                assert holder is not None and result.run is None
                assert result.conflict == self.conflict(name, held_value, holder)
                return
            assert result.run is not None, result
            superseded = None
            if holder is not None and not self.holder_status(holder).is_closed:
                self.statuses[holder] = RunStatus.CANCELLED
                self.closed(holder)
                # its other claims follow their windows, as any cancelled run's do
                self.close_claims(holder, RunStatus.CANCELLED)
                superseded = holder
            assert result.superseded_run_id == superseded
            self.statuses[run_id] = RunStatus.PENDING
            self.attributes[run_id] = {name: held_value}
            self.take(key, value, run_id)
            self.windows.pop((key, value), None)

        @rule(key=st.integers(0, _KEYS - 1), value=st.integers(0, len(_VALUES) - 1))
        def debounce(self, key: int, value: int) -> None:
            """A debounced start: updates an untouched pending holder, else takes the pair."""
            name, held_value = self.pair(key, value)
            run_id = new_run_id()
            request = CreateRunRequest(
                run_id=run_id,
                workflow=self.workflow,
                args=b"\x90",
                attributes={name: held_value},
                unique=frozenset({name}),
                debounce=Debounce(key=name, delay=3600.0, max_delay=7200.0),
            )
            result = _call(world.create_run, request)
            holder = self.claims.get((key, value))
            if (
                holder is not None
                and holder not in self.tombstones
                and self.statuses[holder] == RunStatus.PENDING
                and holder not in self.touched
            ):
                assert result.debounced and result.run is not None, result
                assert result.run.id == holder
                return
            assert result.run is not None and not result.debounced, result
            assert result.run.id == run_id and result.superseded_run_id is None
            self.statuses[run_id] = RunStatus.PENDING
            self.attributes[run_id] = {name: held_value}
            self.take(key, value, run_id)
            self.windows.pop((key, value), None)

        @rule(release=st.booleans())
        def prune(self, release: bool) -> None:
            """Retention: closed runs go; their claims stay as tombstones or are released."""
            cutoff = utcnow() + timedelta(seconds=1)
            prune = functools.partial(world.prune_runs, release_claims=release)
            pruned = set(_call(prune, cutoff, 100_000))
            closed = {run_id for run_id, status in self.statuses.items() if status.is_closed}
            assert closed <= pruned
            for pair, holder in list(self.claims.items()):
                if release and (holder in closed or holder in self.tombstones):
                    del self.claims[pair]
                    self.windows.pop(pair, None)
                elif holder in closed:
                    self.tombstones[holder] = self.statuses[holder]
            if release:
                self.tombstones.clear()
            for run_id in closed:
                del self.statuses[run_id]
                del self.attributes[run_id]

        @precondition(lambda self: bool(self.statuses))
        @rule(
            index=st.integers(0, 1000),
            key=st.integers(0, _KEYS - 1),
            value=st.integers(0, len(_VALUES) - 1),
        )
        def claim(self, index: int, key: int, value: int) -> None:
            run_id = self.pick(index)
            name, held_value = self.pair(key, value)
            event = AttributeSet(key=name, value=held_value, unique=True)
            result = _call(
                world.commit, CommitRequest(run_id=run_id, worker_id="m", events=(event,))
            )
            status = self.statuses[run_id]
            if status.is_closed:
                assert not result.ok and result.status == status and result.events == ()
                return
            self.touched.add(run_id)
            assert result.ok and len(result.events) == 1
            appended = result.events[0]
            holder = self.claims.get((key, value))
            if holder is None or holder == run_id:
                assert isinstance(appended, AttributeSet), f"unexpected {appended!r}"
                if holder is None:  # a claim taken anew has no window (a re-claim keeps its own)
                    self.take(key, value, run_id)
                    self.windows.pop((key, value), None)
                assert appended.generation == self.generations[(key, value)]
                self.attributes[run_id][name] = held_value
            else:
                assert isinstance(appended, AttributeConflict), f"unexpected {appended!r}"
                assert appended.holder_run_id == holder

        @precondition(lambda self: bool(self.statuses))
        @rule(index=st.integers(0, 1000), transition=st.sampled_from(sorted(_TRANSITIONS)))
        def transition(self, index: int, transition: str) -> None:
            run_id = self.pick(index)
            event, target = _TRANSITIONS[transition]
            result = _call(
                world.commit, CommitRequest(run_id=run_id, worker_id="m", events=(event,))
            )
            status = self.statuses[run_id]
            if status.is_closed:
                assert not result.ok and result.status == status
                return
            self.touched.add(run_id)
            assert result.ok and result.status == target
            self.statuses[run_id] = target
            if target.is_closed:
                self.closed(run_id)
                self.close_claims(run_id, target)

        @precondition(lambda self: bool(self.statuses))
        @rule(index=st.integers(0, 1000), reason=st.none() | st.just("stop"))
        def cancel(self, index: int, reason: str | None) -> None:
            run_id = self.pick(index)
            record = _call(world.cancel_run, run_id, reason)
            if not self.statuses[run_id].is_closed:
                self.statuses[run_id] = RunStatus.CANCELLED
                self.closed(run_id)
                self.close_claims(run_id, RunStatus.CANCELLED)
            assert record is not None and record.status == self.statuses[run_id]

        @rule(key=st.integers(0, _KEYS - 1), value=st.integers(0, len(_VALUES) - 1))
        def release(self, key: int, value: int) -> None:
            """An operator releases a pair: only a closed or pruned holder lets it go."""
            name, held_value = self.pair(key, value)
            answer = _call(world.release_claim, name, held_value)
            holder = self.claims.get((key, value))
            if holder is None:
                assert answer is None, answer
            elif holder in self.tombstones or self.statuses[holder].is_closed:
                assert isinstance(answer, Claim), answer
                assert (answer.run_id, answer.generation) == (
                    holder,
                    self.generations[(key, value)],
                )
                assert answer.pruned_status == self.tombstones.get(holder)
                del self.claims[(key, value)]
                self.windows.pop((key, value), None)
            else:
                assert answer == ClaimConflict(
                    key=name,
                    value=held_value,
                    holder_run_id=holder,
                    holder_status=self.statuses[holder],
                ), answer

        @invariant()
        def world_agrees(self) -> None:
            for key in range(_KEYS):
                for value in range(len(_VALUES)):
                    found = _call(world.find_claim, *self.pair(key, value))
                    holder = self.claims.get((key, value))
                    assert (found.run_id if found else None) == holder, f"claim {key}/{value}"
                    if found is not None:
                        assert found.generation == self.generations[(key, value)]
                        assert found.pruned_status == self.tombstones.get(found.run_id)
            for run_id, status in self.statuses.items():
                record = _call(world.get_run, run_id)
                assert record is not None and record.status == status, run_id
                assert record.attributes == self.attributes[run_id], run_id
            for (key, value), holders in self.holders.items():
                rows = _call(world.list_slots, *self.limited_pair(key, value))
                assert [r.run_id for r in rows if r.holding] == holders, f"holders {key}/{value}"
                waiting = [r.run_id for r in rows if not r.holding]
                assert waiting == self.waiters[(key, value)], f"waiters {key}/{value}"
                assert len(holders) <= _LIMITS[key] + (_BURSTS[value] if key == _KEYED else 0)
            page = _call(world.list_runs, RunQuery(workflow=self.workflow, limit=1000))
            assert {run.id: run.status for run in page.runs} == self.statuses

    return WorldModel


class ModelConformance(ConformanceBase):
    """Random sequences of operations checked against a model (hypothesis)."""

    @pytest.mark.anyio
    async def test_claims_and_statuses_follow_the_model(self, world: World) -> None:
        """After any sequence of create/claim/commit/cancel, the world matches the model."""
        machine = _machine(world)
        await anyio.to_thread.run_sync(
            functools.partial(run_state_machine_as_test, machine, settings=_SETTINGS)
        )

    @pytest.mark.anyio
    async def test_a_pair_claimed_anew_after_its_window_released_it_keeps_no_window(
        self, world: World
    ) -> None:
        """A sequence hypothesis once found: a ``ttl=0`` claim closes and frees the pair,
        another run claims it with no window, and that claim outlives its run's close."""

        def steps() -> None:
            state: Any = _machine(world)()  # the rules, called in the order found
            state.create_limited(key=0, value=0, fail=False)
            state.create(key=0, unique=True, value=0, window=ReuseWindow(ttl=0.0))
            state.cancel(index=1, reason=None)
            state.claim(index=0, key=0, value=0)
            state.cancel(index=0, reason=None)
            state.world_agrees()

        await anyio.to_thread.run_sync(steps)
