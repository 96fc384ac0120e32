"""Conformance of ``list_runs``: filters, newest-first order, and cursor pagination."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import msgspec
import pytest

from worlds.protocol import World
from worlds.query import (
    And,
    AttrRef,
    Compare,
    Expr,
    FieldRef,
    In,
    IsNull,
    Not,
    Or,
    RunQuery,
    StartsWith,
    matches,
)
from worlds.testing._base import ConformanceBase, create_run
from worlds.types import (
    AttributeSet,
    AttributeValue,
    CommitRequest,
    ErrorInfo,
    EventKind,
    RunCompleted,
    RunFailed,
    RunRecord,
    RunStarted,
    RunStatus,
)

__all__ = ["SearchConformance"]


async def _ids(world: World, query: RunQuery) -> list[str]:
    """Ids on the first page of ``query``."""
    return [run.id for run in (await world.list_runs(query)).runs]


async def _every_page(world: World, query: RunQuery, *, max_pages: int) -> list[str]:
    """Ids over every page of ``query``, following cursors."""
    seen: list[str] = []
    cursor = query.cursor
    for _ in range(max_pages):
        page = await world.list_runs(msgspec.structs.replace(query, cursor=cursor))
        assert len(page.runs) <= query.limit, (
            f"a page of {len(page.runs)} runs, limit {query.limit}"
        )
        seen.extend(run.id for run in page.runs)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    pytest.fail(f"pagination with limit={query.limit} did not end after {max_pages} pages")


async def _commit(world: World, run: RunRecord, *events: EventKind) -> None:
    """Commit ``events`` to ``run`` without a lease."""
    result = await world.commit(CommitRequest(run_id=run.id, worker_id="w", events=events))
    assert result.ok, f"commit refused: {result!r}"


_NOON = datetime(2024, 1, 1, 12, tzinfo=UTC)
_WHERE_ATTRIBUTES: list[dict[str, AttributeValue]] = [
    {"customer": "c1", "tier": 1, "vip": True},
    {"customer": "c2", "tier": 2, "score": 2.5, "due": _NOON},
    {"customer": "c10", "tier": 10, "score": -1, "due": _NOON + timedelta(days=1)},
    {"customer": "d1", "tier": "1", "note": None},
    {"odd key": "x", "tier": 1.0, "score": 7},
    {},
]


def _attr(key: str) -> AttrRef:
    return AttrRef(key)


def _field(name: str) -> FieldRef:
    return FieldRef(name)  # type: ignore[arg-type]


_WHERE_CASES: list[tuple[Expr, list[int]]] = [
    # (filter, indexes into _WHERE_ATTRIBUTES of the runs it must find)
    (Compare(_attr("customer"), "=", "c1"), [0]),
    (Compare(_attr("tier"), "=", 1), [0]),
    (Compare(_attr("tier"), "!=", 1), [1, 2, 3, 4]),
    (Not(Compare(_attr("tier"), "=", 1)), [1, 2, 3, 4, 5]),
    (Compare(_attr("tier"), ">", 1), [1, 2]),
    (Compare(_attr("tier"), ">=", 1), [0, 1, 2, 4]),
    (Compare(_attr("score"), "<", 2.5), [2]),
    (Compare(_attr("score"), "<=", 7), [1, 2, 4]),
    (Compare(_attr("customer"), "<", "c2"), [0, 2]),
    (Compare(_attr("due"), ">", _NOON), [2]),
    (In(_attr("customer"), ("c1", "d1", "zz")), [0, 3]),
    (StartsWith(_attr("customer"), "c1"), [0, 2]),
    (StartsWith(_attr("tier"), "1"), [3]),
    (IsNull(_attr("note")), [0, 1, 2, 3, 4, 5]),
    (IsNull(_attr("score"), negated=True), [1, 2, 4]),
    (Compare(_attr("note"), "=", None), [3]),
    (Compare(_attr("vip"), "=", True), [0]),
    (Compare(_attr("odd key"), "=", "x"), [4]),
    (And((Compare(_attr("tier"), "=", 1), Compare(_attr("vip"), "=", True))), [0]),
    (And((Compare(_attr("customer"), "=", "c2"), Compare(_attr("customer"), "=", "c1"))), []),
    (Or((Compare(_attr("tier"), "=", 2), StartsWith(_attr("customer"), "d"))), [1, 3]),
    (And((Compare(_attr("score"), ">", 0), Not(IsNull(_attr("due"))))), [1]),
    (Compare(_field("workflow"), "=", "even"), [0, 2, 4]),
    (StartsWith(_field("workflow"), "od"), [1, 3, 5]),
    (Compare(_field("status"), "=", "cancelled"), [1]),
    (In(_field("status"), ("completed", "cancelled")), [0, 1]),
    (IsNull(_field("closed_at")), [2, 3, 4, 5]),
    (Compare(_field("created_at"), ">=", _NOON), [0, 1, 2, 3, 4, 5]),
    (Compare(_field("closed_at"), ">=", _NOON), [0, 1]),
    (Not(Compare(_field("closed_at"), ">=", _NOON)), [2, 3, 4, 5]),
    (And((Compare(_attr("tier"), "=", 1), Compare(_field("status"), "=", "completed"))), [0]),
]


class WhereConformance(ConformanceBase):
    """``RunQuery.where``: filter expressions agree with ``worlds.query.matches``."""

    async def _populate(self, world: World) -> list[RunRecord]:
        runs = []
        for n, attributes in enumerate(_WHERE_ATTRIBUTES):
            runs.append(
                await create_run(
                    world, workflow="even" if n % 2 == 0 else "odd", attributes=attributes
                )
            )
        await _commit(world, runs[0], RunStarted(), RunCompleted(result=b""))
        assert await world.cancel_run(runs[1].id, "test") is not None
        await _commit(world, runs[2], RunStarted())
        return [record for run in runs if (record := await world.get_run(run.id)) is not None]

    @pytest.mark.anyio
    async def test_where_filters_agree_with_the_reference(self, world: World) -> None:
        """Each filter finds exactly the runs the reference evaluator picks, newest first."""
        runs = await self._populate(world)
        for expr, wanted in _WHERE_CASES:
            expected = [runs[i].id for i in reversed(wanted)]
            reference = [run.id for run in reversed(runs) if matches(run, expr)]
            assert reference == expected, f"reference semantics of {expr!r}"
            assert await _ids(world, RunQuery(where=expr)) == expected, f"where={expr!r}"

    @pytest.mark.anyio
    async def test_where_combines_with_other_filters_and_pages(self, world: World) -> None:
        """``where`` is ANDed with the other fields, and cursors page through it."""
        runs = await self._populate(world)
        ids = [run.id for run in runs]
        tier_one = Compare(_attr("tier"), "=", 1)
        some = Or((tier_one, Compare(_attr("tier"), ">", 1), IsNull(_attr("customer"))))
        assert await _ids(world, RunQuery(where=some)) == [ids[5], ids[4], ids[2], ids[1], ids[0]]
        query = RunQuery(where=some, workflow="even", limit=1)
        assert await _every_page(world, query, max_pages=5) == [ids[4], ids[2], ids[0]]
        statuses = frozenset({RunStatus.PENDING, RunStatus.RUNNING})
        assert await _ids(world, RunQuery(where=some, statuses=statuses)) == [
            ids[5],
            ids[4],
            ids[2],
        ]
        both = RunQuery(attributes={"customer": "c1"}, where=tier_one)
        assert await _ids(world, both) == [ids[0]]
        clash = RunQuery(attributes={"tier": 2}, where=tier_one)
        assert await _ids(world, clash) == []

    @pytest.mark.anyio
    async def test_where_values_are_data_not_code(self, world: World) -> None:
        """Quotes, wildcards and SQL in keys and values are matched literally."""
        tricky = ["it's", "a%b", "_", "x' OR '1'='1", "--", "\\"]
        runs = [await create_run(world, attributes={"k'; DROP": v}) for v in tricky]
        key = _attr("k'; DROP")
        for value, run in zip(tricky, runs, strict=True):
            assert await _ids(world, RunQuery(where=Compare(key, "=", value))) == [run.id]
            prefixed = [r.id for v, r in zip(tricky, runs, strict=True) if v.startswith(value)]
            found = await _ids(world, RunQuery(where=StartsWith(key, value)))
            assert found == prefixed[::-1], f"STARTS_WITH {value!r}"
        assert await _ids(world, RunQuery(where=StartsWith(_attr("k'; DROP"), "a_"))) == []
        assert len(await _ids(world, RunQuery())) == len(tricky)

    @pytest.mark.anyio
    async def test_a_malformed_where_raises_value_error(self, world: World) -> None:
        """An ill-typed tree (a time field against a string) is refused with ``ValueError``."""
        await create_run(world)
        for bad in (
            Compare(_field("created_at"), ">", "yesterday"),
            And((Compare(_attr("a"), "=", 1),)),
            In(_attr("a"), ()),
            Compare(_attr("a"), "<", None),
        ):
            with pytest.raises(ValueError):
                await world.list_runs(RunQuery(where=bad))


class SearchConformance(WhereConformance):
    """``list_runs``: what it finds, in which order, one page at a time, and ``where``."""

    @pytest.mark.anyio
    async def test_list_runs_is_newest_first(self, world: World) -> None:
        """Without filters every run comes back, newest first, current records."""
        runs = [await create_run(world, workflow=f"wf-{n % 2}") for n in range(5)]
        await _commit(world, runs[1], RunStarted())
        current = [await world.get_run(run.id) for run in runs]
        page = await world.list_runs(RunQuery())
        assert list(page.runs) == list(reversed(current))
        assert page.next_cursor is None
        created = [run.created_at for run in page.runs]
        assert created == sorted(created, reverse=True)

    @pytest.mark.anyio
    async def test_list_runs_filters_by_workflow_status_and_attributes(self, world: World) -> None:
        """Every given filter must match; attributes combine with AND."""
        a = await create_run(world, workflow="billing", attributes={"customer": "c1", "tier": 1})
        b = await create_run(world, workflow="billing", attributes={"customer": "c1", "tier": 2})
        c = await create_run(world, workflow="shipping", attributes={"customer": "c1", "tier": 1})
        d = await create_run(world, workflow="billing", attributes={"customer": "c2", "tier": 1})
        e = await create_run(world, workflow="billing", attributes={"customer": "c2"})
        await _commit(world, b, RunStarted())
        await _commit(world, c, RunStarted(), RunCompleted(result=b""))
        await _commit(world, e, RunFailed(error=ErrorInfo(type="E", message="m")))
        assert await world.cancel_run(d.id, None) is not None
        billing = await _ids(world, RunQuery(workflow="billing"))
        assert billing == [e.id, d.id, b.id, a.id]
        assert await _ids(world, RunQuery(workflow="nope")) == []
        assert await _ids(world, RunQuery(statuses=frozenset({RunStatus.PENDING}))) == [a.id]
        running_or_cancelled = frozenset({RunStatus.RUNNING, RunStatus.CANCELLED})
        assert await _ids(world, RunQuery(statuses=running_or_cancelled)) == [d.id, b.id]
        closed = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})
        assert await _ids(world, RunQuery(statuses=closed)) == [e.id, d.id, c.id]
        assert await _ids(world, RunQuery(attributes={"customer": "c1"})) == [c.id, b.id, a.id]
        both: dict[str, AttributeValue] = {"customer": "c1", "tier": 1}
        assert await _ids(world, RunQuery(attributes=both)) == [c.id, a.id]
        everything = RunQuery(
            workflow="billing", statuses=frozenset({RunStatus.PENDING}), attributes=both
        )
        assert await _ids(world, everything) == [a.id]
        assert await _ids(world, RunQuery(attributes={"customer": "c3"})) == []
        assert await _ids(world, RunQuery(attributes={"tier": 2, "customer": "c2"})) == []
        (listed,) = (await world.list_runs(RunQuery(workflow="shipping"))).runs
        assert listed.status == RunStatus.COMPLETED and listed.result == b""

    @pytest.mark.anyio
    async def test_several_attribute_filters_agree_in_any_order(self, world: World) -> None:
        """Filters of very different selectivity find the same runs and pages in any order.

        A world may scan the most selective filter first (``terms.SELECTIVITY_CAP``);
        which one it scans never changes what it finds, or the cursors.
        """
        wanted: list[str] = []
        for n in range(24):
            attributes: dict[str, AttributeValue] = {"tenant": "t1", "n": n % 2}
            if n % 3 == 0:
                attributes["customer"] = "c1"
            run = await create_run(world, attributes=attributes)
            if n % 6 == 0:
                wanted.append(run.id)
        await create_run(world, attributes={"tenant": "t2", "customer": "c1", "n": 0})
        expected = wanted[::-1]
        pairs: list[tuple[str, AttributeValue]] = [("tenant", "t1"), ("customer", "c1"), ("n", 0)]
        for ordered in (pairs, pairs[::-1], [pairs[1], pairs[0], pairs[2]]):
            for limit in (1, 2, 3, 5):
                query = RunQuery(attributes=dict(ordered), limit=limit)
                found = await _every_page(world, query, max_pages=10)
                assert found == expected, f"order {ordered}, limit {limit}"
                terms = And(tuple(Compare(_attr(key), "=", value) for key, value in ordered))
                found = await _every_page(world, RunQuery(where=terms, limit=limit), max_pages=10)
                assert found == expected, f"where {ordered}, limit {limit}"
        two = RunQuery(attributes={"tenant": "t1", "customer": "c1"})
        assert len(await _ids(world, two)) == 8
        assert await _ids(world, RunQuery(attributes={"tenant": "t2", "n": 1})) == []

    @pytest.mark.anyio
    async def test_an_empty_status_set_matches_nothing(self, world: World) -> None:
        """``statuses=frozenset()`` is a filter no run passes (not "any status")."""
        await create_run(world)
        assert await _ids(world, RunQuery(statuses=frozenset())) == []

    @pytest.mark.anyio
    async def test_attribute_filters_respect_value_types(self, world: World) -> None:
        """``1``, ``"1"``, ``True``, ``1.5``, ``None`` and datetimes each find only their run."""
        noon = datetime(2024, 1, 1, 12, tzinfo=UTC)
        values: list[AttributeValue] = [1, "1", True, 1.5, None, noon]
        runs = [await create_run(world, attributes={"v": value}) for value in values]
        await create_run(world, attributes={"other": 1})
        for value, run in zip(values, runs, strict=True):
            assert await _ids(world, RunQuery(attributes={"v": value})) == [run.id], f"v={value!r}"
        elsewhere = noon.astimezone(timezone(timedelta(hours=-5)))
        assert await _ids(world, RunQuery(attributes={"v": elsewhere})) == [runs[-1].id]

    @pytest.mark.anyio
    async def test_attribute_filters_follow_attribute_changes(self, world: World) -> None:
        """Run-level ``AttributeSet`` re-indexes the run; step-scoped ones are not searchable."""
        run = await create_run(world, attributes={"stage": "new"})
        await _commit(
            world,
            run,
            AttributeSet(key="stage", value="paid"),
            AttributeSet(key="step_only", value="x", step=1, attempt=1),
        )
        assert await _ids(world, RunQuery(attributes={"stage": "paid"})) == [run.id]
        assert await _ids(world, RunQuery(attributes={"stage": "new"})) == []
        assert await _ids(world, RunQuery(attributes={"step_only": "x"})) == []

    @pytest.mark.anyio
    async def test_list_runs_filters_by_creation_time(self, world: World) -> None:
        """``created_after`` is inclusive and ``created_before`` exclusive."""
        runs: list[RunRecord] = []
        for _ in range(4):
            runs.append(await create_run(world))
            await anyio.sleep(0.02)
        times = [run.created_at for run in runs]
        assert times == sorted(times) and len(set(times)) == 4, f"creation times {times}"

        def between(index: int) -> datetime:
            return times[index] + (times[index + 1] - times[index]) / 2

        ids = [run.id for run in runs]
        assert await _ids(world, RunQuery(created_after=between(0))) == ids[:0:-1]
        assert await _ids(world, RunQuery(created_before=between(1))) == [ids[1], ids[0]]
        window = RunQuery(created_after=between(0), created_before=between(2))
        assert await _ids(world, window) == [ids[2], ids[1]]
        edges = RunQuery(created_after=times[1], created_before=times[3])
        assert await _ids(world, edges) == [ids[2], ids[1]]
        assert await _ids(world, RunQuery(created_after=times[3] + timedelta(seconds=1))) == []

    @pytest.mark.anyio
    async def test_pagination_yields_every_matching_run_once(self, world: World) -> None:
        """For limit 1..7, following cursors lists each matching run once, in order."""
        wanted: list[str] = []
        for n in range(12):
            wanted.append((await create_run(world, workflow="paged")).id)
            if n % 3 == 0:
                await create_run(world, workflow="other")
        expected = wanted[::-1]
        for limit in range(1, 8):
            query = RunQuery(workflow="paged", limit=limit)
            assert await _every_page(world, query, max_pages=14) == expected, f"limit={limit}"
            first = await world.list_runs(query)
            assert len(first.runs) >= 1 and first.next_cursor is not None, f"limit={limit}"
        single = await world.list_runs(RunQuery(workflow="paged", limit=12))
        assert [run.id for run in single.runs] == expected

    @pytest.mark.anyio
    async def test_runs_named_by_id_page_and_filter_like_any_other(self, world: World) -> None:
        """``id IN (...)`` (how ``Run.result``'s shared reader asks which waited runs
        closed) gives just the named runs that exist, newest first, with the other
        filters applied and cursors working."""
        runs = [await create_run(world, workflow="named") for _ in range(5)]
        await _commit(world, runs[1], RunCompleted(result=b""))
        await _commit(world, runs[3], RunCompleted(result=b""))
        named = In(FieldRef("id"), (runs[3].id, runs[0].id, runs[1].id, "no-such-run"))
        every = await world.list_runs(RunQuery(where=named))
        assert [run.id for run in every.runs] == [runs[3].id, runs[1].id, runs[0].id]
        closed = RunQuery(statuses=frozenset({RunStatus.COMPLETED}), where=named)
        assert [run.id for run in (await world.list_runs(closed)).runs] == [runs[3].id, runs[1].id]
        paged = await _every_page(world, RunQuery(where=named, limit=1), max_pages=4)
        assert paged == [runs[3].id, runs[1].id, runs[0].id]

    @pytest.mark.anyio
    async def test_pages_stay_stable_when_newer_runs_arrive(self, world: World) -> None:
        """Runs created while paging do not shift later pages."""
        ids = [(await create_run(world)).id for _ in range(6)]
        first = await world.list_runs(RunQuery(limit=3))
        assert [run.id for run in first.runs] == ids[:2:-1]
        assert first.next_cursor is not None
        for _ in range(2):
            await create_run(world)
        rest = await _every_page(world, RunQuery(limit=3, cursor=first.next_cursor), max_pages=5)
        assert rest == ids[2::-1]

    @pytest.mark.anyio
    async def test_a_malformed_cursor_raises_value_error(self, world: World) -> None:
        """A cursor ``list_runs`` never issued is refused with ``ValueError``."""
        await create_run(world)
        for cursor in ("not a cursor!", "%%%", "\x00\xff", "a"):
            with pytest.raises(ValueError):
                await world.list_runs(RunQuery(cursor=cursor))
