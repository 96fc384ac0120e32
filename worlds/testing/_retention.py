"""Conformance of retention: ``prune_expired`` per status, ``prune_listed``, pins and
the changeable settings (``put_setting``)."""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World
from worlds.query import RunQuery
from worlds.testing._base import ConformanceBase, create_run
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    EventKind,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStatus,
)

__all__ = ["RetentionConformance"]


async def _closed(world: World, event: EventKind, **attributes: str) -> str:
    run = await create_run(world, attributes=attributes, unique=list(attributes))
    done = await world.commit(CommitRequest(run_id=run.id, worker_id="w", events=(event,)))
    assert done.ok and done.status.is_closed
    return run.id


class RetentionConformance(ConformanceBase):
    """Each closed status pruned past its own window; a pinned run never pruned."""

    @pytest.mark.anyio
    async def test_prune_expired_prunes_each_status_past_its_window_only(
        self, world: World
    ) -> None:
        """A window per status, by the world's clock; statuses without one stay; a
        pinned run stays whatever its age; claims become tombstones."""
        done = [await _closed(world, RunCompleted(result=b"")) for _ in range(4)]
        failed = [
            await _closed(world, RunFailed(error=ErrorInfo(type="E", message="m")), order=f"o-{n}")
            for n in range(3)
        ]
        cancelled = [await _closed(world, RunCancelled()) for _ in range(2)]
        open_run = await create_run(world)
        pinned = await world.pin_run(done[1], True)
        assert pinned is not None and pinned.attributes["$pinned"] is True
        assert (await world.pin_run(done[1], True)) == pinned  # again: unchanged
        await anyio.sleep(0.01)
        keep = {RunStatus.COMPLETED: 0.0, RunStatus.FAILED: 0.0, RunStatus.CANCELLED: 86400.0}
        pruned = await world.prune_expired(keep, 2)
        assert len(pruned) == 2
        rest = await world.prune_expired(keep, 1000)
        expected = {done[0], done[2], done[3], *failed}
        assert set(pruned) | set(rest) == expected and len(pruned) + len(rest) == len(expected)
        assert await world.prune_expired(keep, 1000) == []
        left = {run.id for run in (await world.list_runs(RunQuery())).runs}
        assert left == {done[1], *cancelled, open_run.id}
        tombstone = await world.find_claim("order", "o-0")
        assert tombstone is not None and tombstone.pruned_status is RunStatus.FAILED
        with pytest.raises(ValueError):
            await world.prune_expired({RunStatus.RUNNING: 0.0}, 10)
        # unpinned, it goes like any other
        unpinned = await world.pin_run(done[1], False)
        assert unpinned is not None and "$pinned" not in unpinned.attributes
        assert await world.prune_expired(keep, 1000) == [done[1]]
        assert await world.pin_run(done[1], True) is None

    @pytest.mark.anyio
    async def test_prune_listed_and_prune_runs_pass_over_open_and_pinned_runs(
        self, world: World
    ) -> None:
        """Only the closed, unpinned runs of the list go; ``prune_runs`` skips pins too;
        the pin is indexed (a query finds it)."""
        closed = [await _closed(world, RunCompleted(result=b"")) for _ in range(5)]
        open_run = await create_run(world)
        await world.pin_run(closed[0], True)
        await world.pin_run(open_run.id, True)
        page = await world.list_runs(RunQuery(attributes={"$pinned": True}))
        assert {run.id for run in page.runs} == {closed[0], open_run.id}
        listed = [*closed[:3], open_run.id, "no-such-run"]
        assert await world.prune_listed(listed) == sorted(closed[1:3])
        assert await world.prune_listed(listed) == []
        await anyio.sleep(0.01)
        assert sorted(await world.prune_runs(world.now())) == sorted(closed[3:])
        left = {run.id for run in (await world.list_runs(RunQuery())).runs}
        assert left == {closed[0], open_run.id}

    @pytest.mark.anyio
    async def test_put_setting_replaces_and_removes(self, world: World) -> None:
        """``put_setting`` changes what ``setting`` reads; ``None`` removes it."""
        assert await world.setting("retention.test") is None
        await world.put_setting("retention.test", "60")
        await world.put_setting("retention.test", "120")
        assert await world.setting("retention.test") == "120"
        await world.put_setting("retention.test", None)
        assert await world.setting("retention.test") is None
        await world.put_setting("retention.test", None)  # nothing to remove: fine
