"""Conformance of ``count_runs`` (runs per time bucket and status) and ``list_key_slots``."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from worlds.protocol import World
from worlds.query import AttrRef, Compare, CountField, FieldRef, RunCount, RunQuery, StartsWith
from worlds.query import matches as filter_matches
from worlds.semantics import bucket_of, matches, new_run_id
from worlds.testing._base import ConformanceBase, create_run
from worlds.types import (
    AttributeValue,
    CommitRequest,
    CreateRunRequest,
    Limit,
    RunCompleted,
    RunRecord,
    RunStarted,
    RunStatus,
)

__all__ = ["CountConformance"]


def _reference(
    runs: list[RunRecord], query: RunQuery, field: CountField, since: datetime, width: int
) -> list[RunCount]:
    """What ``count_runs`` must answer, from the records and ``worlds.query.matches``."""
    counts: Counter[tuple[int, RunStatus]] = Counter()
    until = since + timedelta(hours=2)
    for run in runs:
        moment = run.created_at if field == "created" else run.closed_at
        if moment is None or not since <= moment < until or not matches(run, query):
            continue
        if query.where is None or filter_matches(run, query.where):
            counts[(bucket_of(moment, since, width), run.status)] += 1
    return [RunCount(bucket=b, status=s, count=n) for (b, s), n in sorted(counts.items())]


class CountConformance(ConformanceBase):
    """``count_runs`` agrees with the reference buckets; ``list_key_slots`` lists a key."""

    async def _populate(self, world: World) -> list[RunRecord]:
        runs = []
        for n in range(9):
            attributes: dict[str, AttributeValue] = {"tenant": f"t{n % 3}", "n": n}
            runs.append(await create_run(world, workflow=f"w{n % 2}", attributes=attributes))
        for run in runs[:4]:
            done = CommitRequest(
                run_id=run.id, worker_id="w", events=(RunStarted(), RunCompleted(result=b""))
            )
            assert (await world.commit(done)).ok
        assert await world.cancel_run(runs[4].id, "test") is not None
        return [record for run in runs if (record := await world.get_run(run.id)) is not None]

    @pytest.mark.anyio
    async def test_counts_agree_with_the_reference(self, world: World) -> None:
        """Per bucket and status, for both fields, with and without filters."""
        runs = await self._populate(world)
        since = min(run.created_at for run in runs) - timedelta(minutes=30)
        until = since + timedelta(hours=2)
        queries = [
            RunQuery(),
            RunQuery(workflow="w1"),
            RunQuery(statuses=frozenset({RunStatus.COMPLETED, RunStatus.PENDING})),
            RunQuery(attributes={"tenant": "t1"}),
            RunQuery(where=Compare(AttrRef("n"), ">=", 4)),
            RunQuery(where=StartsWith(FieldRef("workflow"), "w0")),
        ]
        for field in ("created", "closed"):
            for width in (1, 60, 7200):
                for query in queries:
                    found = await world.count_runs(query, field, since, until, width)
                    wanted = _reference(runs, query, field, since, width)
                    assert found == wanted, f"{field} width={width} {query!r}"
        total = await world.count_runs(RunQuery(), "created", since, until, 7200)
        assert sum(count.count for count in total) == len(runs)
        closed = await world.count_runs(RunQuery(), "closed", since, until, 7200)
        shut = Counter(run.status for run in runs if run.closed_at is not None)
        assert {c.status: c.count for c in closed} == shut
        assert RunStatus.CANCELLED in shut and RunStatus.COMPLETED in shut

    @pytest.mark.anyio
    async def test_the_window_bounds_the_count(self, world: World) -> None:
        """Runs outside ``[since, until)`` are not counted; a bad window is refused."""
        runs = await self._populate(world)
        first = min(run.created_at for run in runs)
        later = first + timedelta(days=3)
        assert (
            await world.count_runs(RunQuery(), "created", later, later + timedelta(hours=1), 60)
            == []
        )
        before = first - timedelta(days=3)
        assert (
            await world.count_runs(RunQuery(), "closed", before, first - timedelta(days=2), 60)
            == []
        )
        now = datetime.now(UTC)
        with pytest.raises(ValueError):
            await world.count_runs(RunQuery(), "created", now, now, 60)
        with pytest.raises(ValueError):
            await world.count_runs(RunQuery(), "created", now, now + timedelta(hours=1), 0)
        with pytest.raises(ValueError):
            await world.count_runs(RunQuery(), "created", now, now + timedelta(days=30), 60)

    @pytest.mark.anyio
    async def test_key_slots_list_every_value_of_a_key(self, world: World) -> None:
        """Holders then waiters of each value, values in index order, other keys apart."""
        ids: dict[str, list[str]] = {}
        starts = [("pool", "b"), ("pool", "a"), ("other", "x"), ("pool", "b"), ("pool", "b")]
        for key, value in [*starts, ("pool", "a")]:
            request = CreateRunRequest(
                run_id=new_run_id(),
                workflow="conformance-counts",
                args=b"",
                attributes={key: value},
                limits={key: Limit(limit=2)},
            )
            result = await world.create_run(request)
            assert result.run is not None
            ids.setdefault(value, []).append(result.run.id)  # "x" is of the other key
        rows = await world.list_key_slots("pool")
        assert [(r.value, r.run_id, r.holding) for r in rows] == [
            ("a", ids["a"][0], True),
            ("a", ids["a"][1], True),
            ("b", ids["b"][0], True),
            ("b", ids["b"][1], True),
            ("b", ids["b"][2], False),
        ]
        assert len(await world.list_key_slots("pool", limit=3)) == 3
        assert await world.list_key_slots("nobody") == []
        assert {r.key for r in await world.list_key_slots("other")} == {"other"}
