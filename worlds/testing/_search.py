"""Conformance of ``list_runs``: filters, newest-first order, and cursor pagination."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import ConformanceBase, create_run
from worlds.types import (
    AttributeSet,
    AttributeValue,
    CommitRequest,
    ErrorInfo,
    EventKind,
    RunCompleted,
    RunFailed,
    RunQuery,
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
        page = await world.list_runs(
            RunQuery(
                workflow=query.workflow,
                statuses=query.statuses,
                attributes=query.attributes,
                created_after=query.created_after,
                created_before=query.created_before,
                limit=query.limit,
                cursor=cursor,
            )
        )
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


class SearchConformance(ConformanceBase):
    """``list_runs``: what it finds, in which order, one page at a time."""

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
