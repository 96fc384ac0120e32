"""Conformance of unique claims: at creation, in commits, per step, and under contention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import pytest

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.testing._base import (
    WF,
    ConformanceBase,
    WorldFactory,
    create_run,
    lease_all,
    new_run_id,
    open_worlds,
)
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    RunStatus,
)

__all__ = ["ClaimsConformance"]


async def _set(
    world: World,
    run_id: str,
    key: str,
    value: AttributeValue,
    *,
    step: int | None = None,
    attempt: int | None = None,
) -> EventKind:
    """Commit one unique ``AttributeSet`` and return the event the world appended."""
    event = AttributeSet(key=key, value=value, unique=True, step=step, attempt=attempt)
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="claimer", events=(event,)))
    assert result.ok, f"claim commit refused: {result!r}"
    assert len(result.events) == 1
    return result.events[0]


def _assert_conflict(event: EventKind, key: str, value: AttributeValue, holder: str) -> None:
    """Fail unless ``event`` is an ``AttributeConflict`` on (key, value) naming ``holder``."""
    assert isinstance(event, AttributeConflict), (
        f"expected a conflict, the world appended {event!r}"
    )
    assert (event.key, event.value, event.holder_run_id) == (key, value, holder)


class ClaimsConformance(ConformanceBase):
    """Unique attribute claims: ``create_run``, ``commit`` and ``find_claim``."""

    @pytest.mark.anyio
    async def test_create_run_claims_its_unique_pairs(self, world: World) -> None:
        """Unique pairs are claimed by the new run; plain attributes are not."""
        run = await create_run(
            world, attributes={"order": "o-1", "customer": "c-1"}, unique={"order"}
        )
        claim = await world.find_claim("order", "o-1")
        assert claim is not None
        assert (claim.key, claim.value, claim.run_id) == ("order", "o-1", run.id)
        assert claim.generation >= 1
        assert (claim.step, claim.attempt) == (None, None)
        assert await world.find_claim("customer", "c-1") is None
        assert await world.find_claim("order", "o-2") is None
        assert await world.find_claim("nobody", "o-1") is None

    @pytest.mark.anyio
    async def test_a_conflict_at_creation_writes_nothing(self, world: World) -> None:
        """A held pair refuses the run: no record, log, attributes, claims or work."""
        holder = await create_run(
            world, workflow="first", attributes={"order": "o-1"}, unique={"order"}
        )
        refused_id = new_run_id()
        result = await world.create_run(
            CreateRunRequest(
                run_id=refused_id,
                workflow="second",
                args=b"",
                attributes={"order": "o-1", "invoice": "i-1", "note": "n"},
                unique=frozenset({"order", "invoice"}),
            )
        )
        assert result.run is None
        assert result.conflict == ClaimConflict(
            key="order", value="o-1", holder_run_id=holder.id, holder_status=RunStatus.PENDING
        )
        assert await world.get_run(refused_id) is None
        assert await world.read_events(refused_id) == []
        assert await world.find_claim("invoice", "i-1") is None, "a refused run kept a claim"
        assert (await world.list_runs(RunQuery(attributes={"note": "n"}))).runs == ()
        assert (await world.list_runs(RunQuery(workflow="second"))).runs == ()
        assert await lease_all(world, {"second"}) == []
        claim = await world.find_claim("order", "o-1")
        assert claim is not None and claim.run_id == holder.id
        again = await create_run(
            world, run_id=refused_id, attributes={"invoice": "i-1"}, unique={"invoice"}
        )
        assert again.id == refused_id, "the refused run id was not free"

    @pytest.mark.anyio
    async def test_a_conflict_names_a_holder_of_one_of_the_pairs(self, world: World) -> None:
        """With several held pairs the conflict names one of them and its holder."""
        a = await create_run(world, attributes={"x": "1"}, unique={"x"})
        b = await create_run(world, attributes={"y": "2"}, unique={"y"})
        result = await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"x": "1", "y": "2"},
                unique=frozenset({"x", "y"}),
            )
        )
        assert result.run is None and result.conflict is not None
        held = {("x", "1", a.id), ("y", "2", b.id)}
        conflict = result.conflict
        assert (conflict.key, conflict.value, conflict.holder_run_id) in held

    @pytest.mark.anyio
    async def test_claims_distinguish_value_types(self, world: World) -> None:
        """``1``, ``1.0``, ``True`` and ``"1"`` are four values; datetimes compare as instants."""
        for value in (1, 1.0, True, "1"):
            await create_run(world, attributes={"n": value}, unique={"n"})
        for value in (1, 1.0, True, "1"):
            claim = await world.find_claim("n", value)
            assert claim is not None and type(claim.value) is type(value)
        noon = datetime(2024, 1, 1, 12, tzinfo=UTC)
        holder = await create_run(world, attributes={"at": noon}, unique={"at"})
        same_instant = noon.astimezone(timezone(timedelta(hours=2)))
        result = await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"at": same_instant},
                unique=frozenset({"at"}),
            )
        )
        assert result.conflict is not None and result.conflict.holder_run_id == holder.id
        claim = await world.find_claim("at", same_instant)
        assert claim is not None and claim.run_id == holder.id

    @pytest.mark.anyio
    async def test_commit_claims_a_pair_or_appends_a_conflict(self, world: World) -> None:
        """A unique ``AttributeSet`` claims a free pair; a held one becomes a conflict."""
        a = await create_run(world)
        b = await create_run(world)
        won = await _set(world, a.id, "invoice", "inv-1")
        assert isinstance(won, AttributeSet) and won.unique and won.generation is not None
        claim = await world.find_claim("invoice", "inv-1")
        assert claim is not None and (claim.run_id, claim.generation) == (a.id, won.generation)
        lost = await _set(world, b.id, "invoice", "inv-1")
        _assert_conflict(lost, "invoice", "inv-1", a.id)
        again = await _set(world, a.id, "invoice", "inv-1")
        assert isinstance(again, AttributeSet), "a run conflicted with its own claim"
        record_a, record_b = await world.get_run(a.id), await world.get_run(b.id)
        assert record_a is not None and record_a.attributes == {"invoice": "inv-1"}
        assert record_b is not None and record_b.attributes == {}
        claim = await world.find_claim("invoice", "inv-1")
        assert claim is not None and claim.run_id == a.id

    @pytest.mark.anyio
    async def test_a_conflict_does_not_stop_the_rest_of_the_commit(self, world: World) -> None:
        """Events around a conflict are appended in order, densely."""
        holder = await create_run(world, attributes={"k2": "held"}, unique={"k2"})
        run = await create_run(world)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="w",
                events=(
                    AttributeSet(key="k1", value="free", unique=True),
                    AttributeSet(key="k2", value="held", unique=True),
                    AttributeSet(key="k3", value="plain"),
                ),
            )
        )
        assert result.ok
        assert [(type(e), e.seq) for e in result.events] == [
            (AttributeSet, 2),
            (AttributeConflict, 3),
            (AttributeSet, 4),
        ]
        _assert_conflict(result.events[1], "k2", "held", holder.id)
        assert await world.read_events(run.id, after_seq=1) == list(result.events)
        record = await world.get_run(run.id)
        assert record is not None and record.attributes == {"k1": "free", "k3": "plain"}

    @pytest.mark.anyio
    async def test_step_claims_hold_across_attempts_of_the_same_step_only(
        self, world: World
    ) -> None:
        """A step's claim never conflicts with its own retries, but does with anyone else."""
        a = await create_run(world)
        b = await create_run(world)
        first = await _set(world, a.id, "payment", "p-1", step=1, attempt=1)
        assert isinstance(first, AttributeSet) and first.generation is not None
        claim = await world.find_claim("payment", "p-1")
        assert claim is not None and (claim.run_id, claim.step) == (a.id, 1)
        retry = await _set(world, a.id, "payment", "p-1", step=1, attempt=2)
        assert isinstance(retry, AttributeSet), "a retry conflicted with its own step's claim"
        assert retry.generation == first.generation
        _assert_conflict(
            await _set(world, a.id, "payment", "p-1", step=2, attempt=1), "payment", "p-1", a.id
        )
        _assert_conflict(
            await _set(world, b.id, "payment", "p-1", step=1, attempt=1), "payment", "p-1", a.id
        )
        claim = await world.find_claim("payment", "p-1")
        assert claim is not None and (claim.run_id, claim.step) == (a.id, 1)
        record = await world.get_run(a.id)
        assert record is not None and record.attributes == {}, "a step claim set a run attribute"

    @pytest.mark.anyio
    async def test_run_claims_lists_the_runs_and_its_steps_pairs(self, world: World) -> None:
        """Every pair ``find_claim`` resolves to a run is in its ``run_claims``, by key then
        value; a step's claim carries its step and the attempt that claimed it last."""
        run = await create_run(world, attributes={"order": "o-1"}, unique={"order"})
        await _set(world, run.id, "payment", "p-2", step=2, attempt=1)
        await _set(world, run.id, "payment", "p-1", step=1, attempt=1)
        await _set(world, run.id, "payment", "p-1", step=1, attempt=2)
        await _set(world, run.id, "invoice", "i-1")
        claims = await world.run_claims(run.id)
        assert [(c.key, c.value, c.run_id, c.step, c.attempt) for c in claims] == [
            ("invoice", "i-1", run.id, None, None),
            ("order", "o-1", run.id, None, None),
            ("payment", "p-1", run.id, 1, 2),
            ("payment", "p-2", run.id, 2, 1),
        ]
        for claim in claims:
            assert await world.find_claim(claim.key, claim.value) == claim

    @pytest.mark.anyio
    async def test_a_claim_outlives_its_holder(self, world: World) -> None:
        """A closed holder keeps its claims: a new run with the pair is refused."""
        holder = await create_run(world, attributes={"order": "o-9"}, unique={"order"})
        assert await world.cancel_run(holder.id, None) is not None
        claim = await world.find_claim("order", "o-9")
        assert claim is not None and claim.run_id == holder.id
        result = await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow=WF,
                args=b"",
                attributes={"order": "o-9"},
                unique=frozenset({"order"}),
            )
        )
        assert result.conflict == ClaimConflict(
            key="order", value="o-9", holder_run_id=holder.id, holder_status=RunStatus.CANCELLED
        )

    @pytest.mark.anyio
    async def test_concurrent_creates_claim_a_pair_exactly_once(
        self, world: World, world_factory: WorldFactory
    ) -> None:
        """Fifty concurrent ``create_run`` calls on five world objects: one run, 49 conflicts."""
        results: dict[str, CreateRunResult] = {}
        async with open_worlds(world_factory, 5) as worlds:

            async def create(index: int) -> None:
                run_id = new_run_id()
                results[run_id] = await worlds[index % 5].create_run(
                    CreateRunRequest(
                        run_id=run_id,
                        workflow=WF,
                        args=b"",
                        attributes={"order": "o-race", "n": index},
                        unique=frozenset({"order"}),
                    )
                )

            async with anyio.create_task_group() as group:
                for index in range(50):
                    group.start_soon(create, index)
        assert len(results) == 50
        winners = [run_id for run_id, result in results.items() if result.run is not None]
        assert len(winners) == 1, f"{len(winners)} runs claimed the same pair"
        (winner,) = winners
        for run_id, result in results.items():
            if run_id != winner:
                assert result.run is None
                assert result.conflict == ClaimConflict(
                    key="order",
                    value="o-race",
                    holder_run_id=winner,
                    holder_status=RunStatus.PENDING,
                )
                assert await world.get_run(run_id) is None
        claim = await world.find_claim("order", "o-race")
        assert claim is not None and claim.run_id == winner
        listed = await world.list_runs(RunQuery(attributes={"order": "o-race"}))
        assert [run.id for run in listed.runs] == [winner]
        assert [item.run_id for item in await lease_all(world, {WF})] == [winner]

    @pytest.mark.anyio
    async def test_concurrent_commits_claim_a_pair_exactly_once(
        self, world: World, world_factory: WorldFactory
    ) -> None:
        """Ten runs claim one pair at once from five world objects: one wins, nine conflict."""
        runs = [(await create_run(world)).id for _ in range(10)]
        results: dict[str, CommitResult] = {}
        async with open_worlds(world_factory, 5) as worlds:

            async def commit_claim(index: int, run_id: str) -> None:
                event = AttributeSet(key="invoice", value="inv-race", unique=True)
                request = CommitRequest(run_id=run_id, worker_id=f"w{index}", events=(event,))
                results[run_id] = await worlds[index % 5].commit(request)

            async with anyio.create_task_group() as group:
                for index, run_id in enumerate(runs):
                    group.start_soon(commit_claim, index, run_id)
        assert all(result.ok and len(result.events) == 1 for result in results.values())
        winners = [r for r, result in results.items() if isinstance(result.events[0], AttributeSet)]
        assert len(winners) == 1, f"{len(winners)} runs claimed the same pair"
        (winner,) = winners
        for run_id, result in results.items():
            if run_id != winner:
                _assert_conflict(result.events[0], "invoice", "inv-race", winner)
        claim = await world.find_claim("invoice", "inv-race")
        assert claim is not None and claim.run_id == winner
        listed = await world.list_runs(RunQuery(attributes={"invoice": "inv-race"}))
        assert [run.id for run in listed.runs] == [winner]

    @pytest.mark.anyio
    async def test_run_claims_are_the_runs_and_its_steps_pairs_by_key(self, world: World) -> None:
        """``run_claims`` holds what the run won at creation, in commits and in steps, by key;
        a pair it lost to another run is not among them."""
        when = datetime(2024, 5, 17, 12, 30, 15, 123456, tzinfo=UTC)
        run = await create_run(
            world, attributes={"b": 2, "a": when, "plain": "p"}, unique=["b", "a"]
        )
        other = await create_run(world, attributes={"c": "theirs"}, unique=["c"])
        await _set(world, run.id, "c", "mine")
        await _set(world, run.id, "c", "theirs")  # a conflict, not a claim
        await _set(world, run.id, "by-step", "s", step=1, attempt=1)
        assert await world.run_claims(run.id) == [
            Claim(key="a", value=when, run_id=run.id, generation=1),
            Claim(key="b", value=2, run_id=run.id, generation=1),
            Claim(key="by-step", value="s", run_id=run.id, generation=1, step=1, attempt=1),
            Claim(key="c", value="mine", run_id=run.id, generation=1),
        ]
        assert await world.run_claims(other.id) == [
            Claim(key="c", value="theirs", run_id=other.id, generation=1)
        ]
        assert await world.run_claims("missing") == []

    @pytest.mark.anyio
    async def test_create_run_refuses_a_unique_key_without_a_value(self, world: World) -> None:
        """A unique key that is not among the attributes is a ``ValueError`` naming it;
        nothing is written, not even the claims of the keys that have values."""
        request = CreateRunRequest(
            run_id=new_run_id(),
            workflow=WF,
            args=b"",
            attributes={"order": "o-1"},
            unique=frozenset({"order", "invoice"}),
        )
        with pytest.raises(ValueError, match="invoice"):
            await world.create_run(request)
        assert await world.get_run(request.run_id) is None
        assert await world.find_claim("order", "o-1") is None
