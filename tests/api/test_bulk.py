"""Bulk actions by query (``cancel_runs``, ``retry_runs``, ``prune_runs(query=)``) on
every world: exact counts, each target acted on once, the ``$bulk`` run visible."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest

import worlds
from tests.apps.bulkapp import parked
from tests.conftest import full_size
from workflow import (
    BulkResult,
    QuerySyntaxError,
    RunStatus,
    Unique,
    Worker,
    cancel_runs,
    find_run,
    list_runs,
    prune_runs,
    retry_runs,
    start,
    workflow,
)
from worlds.protocol import World
from worlds.types import (
    ListedReopen,
    RunCancelled,
    RunCancelRequested,
    RunRecord,
    RunReopened,
)
from worlds.wrapper import WorldWrapper

pytestmark = pytest.mark.anyio

MANY = 1200  # more than two pages of the $bulk workflow (BATCH = 500)
SCALE = full_size(1_500, 10_000)
"""The scale test's runs: three pages by default, twenty with WORKFLOW_TEST_FULL=1 (at
10,000 it took 3 to 10 minutes per world, 27% of the suite's time; rfcs/0020-test-suite.md)."""


@workflow
async def quick(n: int) -> int:
    return n


async def _park(world: World, count: int, batch: str, first: int = 0) -> list[str]:
    ids = []
    for n in range(first, first + count):
        run = await start(
            parked, n, attributes={"batch": batch, "order": Unique(f"{batch}-{n}")}, world=world
        )
        ids.append(run.id)
    return ids


async def _ids(world: World, query: str) -> set[str]:
    found: set[str] = set()
    cursor = None
    while True:
        page = await list_runs(query=query, limit=1000, cursor=cursor, world=world)
        found |= {run.id for run in page}
        if (cursor := page.next_cursor) is None:
            return found


async def _count(world: World, run_id: str, kind: type) -> int:
    return sum(isinstance(e, kind) for e in await world.read_events(run_id))


async def test_bulk_cancel_acts_on_exactly_the_matching_runs(world: World) -> None:
    wanted = await _park(world, MANY, "a")
    others = await _park(world, 30, "b")
    async with Worker(world, [quick]):
        done = [await start(quick, n, attributes={"batch": "a"}, world=world) for n in range(20)]
        for run in done:
            await run.result(timeout=30)
    told: list[int] = []
    result = await cancel_runs(
        "batch = 'a'", reason="bad deploy", world=world, on_progress=told.append
    )
    assert isinstance(result, BulkResult)
    assert (result.matched, result.done, result.failed) == (MANY + 20, MANY, 20)
    assert sorted(e.run_id for e in result.errors) == sorted(r.id for r in done)
    assert all("completed" in e.message for e in result.errors)
    assert sum(told) == MANY + 20
    for run_id in wanted:
        assert (await world.get_run(run_id)).status is RunStatus.CANCELLED  # type: ignore[union-attr]
        assert await _count(world, run_id, RunCancelled) == 1
    for run_id in others:
        assert (await world.get_run(run_id)).status is RunStatus.PENDING  # type: ignore[union-attr]
    # the bulk action is a run of its own, visible like any other
    bulk = [run for run in await list_runs(workflow="$bulk", world=world)]
    assert [run.id for run in bulk] == [result.run_id]
    assert bulk[0].record is not None and bulk[0].record.attributes["bulk_action"] == "cancel"
    # again: every target is cancelled already, so done (nothing is cancelled twice)
    again = await cancel_runs("batch = 'a'", reason="bad deploy", world=world)
    assert (again.matched, again.done, again.failed) == (MANY + 20, MANY, 20)
    assert again.run_id != result.run_id
    for run_id in wanted[:50]:
        assert await _count(world, run_id, RunCancelled) == 1


async def test_bulk_cancel_of_running_runs_asks_them_to_stop(world: World) -> None:
    async with Worker(world, [parked]):
        runs = [await start(parked, n, attributes={"batch": "r"}, world=world) for n in range(40)]
        for run in runs:  # each waits on its hook: its body ran
            while await run.status() is not RunStatus.RUNNING:
                await world.wait(f"run:{run.id}", 0.5)
        result = await cancel_runs("batch = 'r'", grace=5.0, world=world)
        assert (result.matched, result.done, result.failed) == (40, 40, 0)
        for run in runs:
            assert await _count(world, run.id, RunCancelRequested) == 1
            with pytest.raises(Exception, match="cancelled"):
                await run.result(timeout=30)


async def test_bulk_retry_reopens_each_run_once(world: World) -> None:
    ids = await _park(world, MANY, "a")
    await cancel_runs("batch = 'a'", world=world)
    result = await retry_runs("batch = 'a' AND status = 'cancelled'", world=world)
    assert (result.matched, result.done, result.failed) == (MANY, MANY, 0)
    for run_id in ids:
        assert await _count(world, run_id, RunReopened) == 1
        events = await world.read_events(run_id)
        reopened = next(e for e in events if isinstance(e, RunReopened))
        assert f"bulk run {result.run_id}" in reopened.by
    # the reopened runs are open now: a second retry reopens none of them
    again = await retry_runs("batch = 'a'", world=world)
    assert (again.matched, again.done, again.failed) == (MANY, 0, MANY)
    assert len(again.errors) == 100  # the first ones, the count stays exact
    for run_id in ids[:100]:
        assert await _count(world, run_id, RunReopened) == 1


async def test_bulk_prune_deletes_the_closed_matching_runs_but_never_a_pinned_one(
    world: World,
) -> None:
    ids = await _park(world, 600, "a")
    open_ids = await _park(world, 10, "a", first=600)
    for run_id in ids:
        await world.cancel_run(run_id, None)
    pinned = ids[7]
    from workflow import get_run

    await get_run(pinned, world=world).pin()
    result = await prune_runs(query="batch = 'a'", world=world)
    assert (result.matched, result.done, result.failed) == (600, 599, 1)
    assert [e.run_id for e in result.errors] == [pinned]
    assert await _ids(world, "batch = 'a'") == {pinned, *open_ids}
    # the claims stay as tombstones
    holder = await find_run("order", "a-3", world=world)
    assert holder is not None and holder.pruned_status is RunStatus.CANCELLED
    # closed_before narrows it; the pinned run stays until unpinned
    await get_run(pinned, world=world).unpin()
    later = await prune_runs(
        query="batch = 'a'", closed_before=datetime.now(UTC) - timedelta(days=1), world=world
    )
    assert (later.matched, later.done) == (0, 0)
    last = await prune_runs(query="batch = 'a'", release_claims=True, world=world)
    assert (last.matched, last.done, last.failed) == (1, 1, 0)
    assert await find_run("order", "a-3", world=world) is None


async def test_bad_queries_are_refused_before_anything_runs(world: World) -> None:
    await _park(world, 3, "a")
    with pytest.raises(QuerySyntaxError):
        await cancel_runs("batch = ", world=world)
    with pytest.raises(QuerySyntaxError):
        await retry_runs("status IN (", world=world)
    with pytest.raises(TypeError):
        await prune_runs(world=world)  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        await cancel_runs("batch = 'a'", grace=-1, world=world)
    assert len(await list_runs(workflow="$bulk", world=world)) == 0
    assert len(await _ids(world, "status = 'pending'")) == 3


@pytest.mark.slow
async def test_bulk_cancel_retry_and_prune_at_scale(world: World) -> None:
    count = SCALE
    await _park(world, count, "big")
    result = await cancel_runs("batch = 'big'", world=world)
    assert (result.matched, result.done, result.failed) == (count, count, 0)
    assert len(await _ids(world, "batch = 'big' AND status = 'cancelled'")) == count
    again = await retry_runs("batch = 'big'", world=world)
    assert (again.matched, again.done, again.failed) == (count, count, 0)
    await cancel_runs("batch = 'big'", grace=None, world=world)
    pruned = await prune_runs(query="batch = 'big'", world=world)
    assert (pruned.matched, pruned.done, pruned.failed) == (count, count, 0)
    assert await _ids(world, "batch = 'big'") == set()


class _CountingWorld(WorldWrapper):
    """Records how many runs each ``cancel_listed`` and ``reopen_listed`` transaction
    acted on, and how many runs ``reopen_run`` reopened one at a time."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.chunks: list[int] = []
        self.reopened: list[int] = []
        self.reopened_alone = 0

    async def cancel_listed(
        self, run_ids: Sequence[str], reason: str | None, grace_seconds: float | None
    ) -> dict[str, RunStatus | None]:
        self.chunks.append(len(run_ids))
        return await super().cancel_listed(run_ids, reason, grace_seconds)

    async def reopen_listed(
        self, run_ids: Sequence[str], by: str
    ) -> dict[str, ListedReopen | None]:
        self.reopened.append(len(run_ids))
        return await super().reopen_listed(run_ids, by)

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        self.reopened_alone += 1
        return await super().reopen_run(run_id, by)


async def test_a_bulk_cancel_sizes_its_transactions_by_what_they_take() -> None:
    """The pacer starts at one run a transaction and grows while transactions stay
    short (the memory world's take microseconds), never past 25 runs (RFC 0023)."""
    counting = _CountingWorld(worlds.open("memory://"))
    async with counting:
        await _park(counting, 300, "paced")
        result = await cancel_runs("batch = 'paced'", grace=None, world=counting)
    assert (result.matched, result.done, result.failed) == (300, 300, 0)
    assert sum(counting.chunks) == 300
    assert counting.chunks[0] == 1 and 1 < max(counting.chunks) <= 25
    assert len(counting.chunks) < 300 // 5


async def test_a_bulk_retry_reopens_many_runs_per_transaction() -> None:
    """A bulk retry reopened its runs one world operation each; it reopens them in
    paced chunks now, one ``reopen_listed`` transaction a chunk, as a cancel does."""
    counting = _CountingWorld(worlds.open("memory://"))
    async with counting:
        await _park(counting, 300, "again")
        await cancel_runs("batch = 'again'", grace=None, world=counting)
        result = await retry_runs("batch = 'again'", world=counting)
    assert (result.matched, result.done, result.failed) == (300, 300, 0)
    assert counting.reopened_alone == 0 and sum(counting.reopened) == 300
    assert counting.reopened[0] == 1 and 1 < max(counting.reopened) <= 25
    assert len(counting.reopened) < 300 // 5


_WORLD_CODE = str(Path(worlds.__file__).parent)


class _Work:
    """Counts the bytecode instructions run in ``worlds/`` code: the world's work,
    as a count that does not depend on the machine's speed or load."""

    def __init__(self) -> None:
        self.count = 0

    def _global(self, frame: FrameType, event: str, arg: object) -> Any:
        if not frame.f_code.co_filename.startswith(_WORLD_CODE):
            return None
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return self._local

    def _local(self, frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            self.count += 1
        return self._local

    def __enter__(self) -> _Work:
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


async def _cancel_counted(count: int) -> tuple[int, int]:
    """Park ``count`` runs in a fresh memory world, half waiting on a hook and half not
    yet started, each holding a unique pair (the second half's released when it
    closes); the work of cancelling them all, and how many were cancelled."""
    async with worlds.open("memory://") as world:
        hooked = await _park(world, count // 2, "w")
        async with Worker(world, [parked]):
            while len(await world.list_hooks()) < len(hooked):
                await anyio.sleep(0.01)
        for n in range(count - len(hooked)):
            await start(
                parked,
                n,
                attributes={"batch": "w", "order": Unique(f"p-{n}", release_on={"cancelled"})},
                world=world,
            )
        with _Work() as work:
            result = await cancel_runs("batch = 'w'", grace=None, world=world)
        assert (result.matched, result.done, result.failed) == (count, count, 0)
        cancelled = await _ids(world, "batch = 'w' AND status = 'cancelled'")
        return work.count, len(cancelled)


async def test_a_bulk_cancel_on_the_memory_world_does_work_linear_in_its_runs() -> None:
    """The memory world found one run's children, claims, hooks, work and slots by
    scanning every run's: a bulk cancel of n runs did n scans of n rows. Counted in
    instructions run by the world's code, four times the runs now cost about four
    times the work (it was more than eight times at these sizes)."""
    small, cancelled_small = await _cancel_counted(120)
    large, cancelled_large = await _cancel_counted(480)
    assert (cancelled_small, cancelled_large) == (120, 480)
    assert large / small < 5.5, (small, large)
