"""Conformance of slot history: a sample per limited pair and minute, and its pruning.

Every change of a pair's rows (a limited start, a ``hold()``, a release, a
close, a promotion) updates the pair's sample of that minute, in the same
transaction: ``holders`` and ``waiters`` as the change left them, and the
peaks the minute saw. ``World.slot_history`` reads a key's window and each
pair's newest sample before it; ``World.prune_slot_history`` deletes old
samples but a pair's newest while it shows someone there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import ConformanceBase, WorldFactory, new_run_id, open_worlds
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    EventKind,
    Limit,
    RunCompleted,
    SlotRequested,
    SlotSample,
    utcnow,
)

__all__ = ["SlotHistoryConformance"]

HISTORY_WF = "conformance-slot-history"
"""The workflow name of the kit's sampled runs."""


async def _start(world: World, key: str, value: str, limit: int) -> str:
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=HISTORY_WF,
        args=b"",
        attributes={key: value},
        limits={key: Limit(limit=limit)},
    )
    result = await world.create_run(request)
    assert result.run is not None, f"the start was refused: {result.conflict!r}"
    return result.run.id


async def _commit(world: World, run_id: str, event: EventKind) -> None:
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="kit", events=(event,)))
    assert result.ok, f"commit of {event!r} to {run_id} refused: {result!r}"


def _hour() -> tuple[datetime, datetime]:
    """The last hour, from a minute's start, so per-minute buckets are the samples' minutes."""
    now = utcnow().replace(second=0, microsecond=0)
    return now - timedelta(hours=1), now + timedelta(minutes=2)


async def _samples(world: World, key: str) -> list[SlotSample]:
    return await world.slot_history(key, *_hour())


def _of(samples: list[SlotSample], ivalue: str) -> list[SlotSample]:
    return [s for s in samples if s.ivalue == ivalue]


class SlotHistoryConformance(ConformanceBase):
    """``slot_history`` and ``prune_slot_history``."""

    @pytest.mark.anyio
    async def test_every_change_updates_the_minutes_sample(self, world: World) -> None:
        """Starts, a close that promotes, and the last close: the minute's sample ends
        with the pair as the last change left it, and keeps the peaks it saw."""
        first = await _start(world, "tenant", "a", 2)
        second = await _start(world, "tenant", "a", 2)
        third = await _start(world, "tenant", "a", 2)  # waits
        await _start(world, "tenant", "b", 2)
        samples = await _samples(world, "tenant")
        assert {s.ivalue for s in samples} == {"s:a", "s:b"}
        assert (_of(samples, "s:a")[-1].holders, _of(samples, "s:a")[-1].waiters) == (2, 1)
        assert (_of(samples, "s:b")[-1].holders, _of(samples, "s:b")[-1].waiters) == (1, 0)
        await world.cancel_run(first, "done")  # the third is promoted
        latest = _of(await _samples(world, "tenant"), "s:a")[-1]
        assert (latest.holders, latest.waiters) == (2, 0)
        for run_id in (second, third):
            await world.cancel_run(run_id, "done")
        history = _of(await _samples(world, "tenant"), "s:a")
        assert (history[-1].holders, history[-1].waiters) == (0, 0)
        assert max(s.peak_holders for s in history) == 2
        assert max(s.peak_waiters for s in history) == 1
        for sample in history:
            assert sample.minute.tzinfo is not None and sample.minute.utcoffset() == timedelta(0)
            assert sample.minute.second == 0 and sample.minute.microsecond == 0
            assert sample.peak_holders >= sample.holders and sample.peak_waiters >= sample.waiters
        minutes = [s.minute for s in history]
        assert minutes == sorted(set(minutes)), "one sample per pair and minute, in order"

    @pytest.mark.anyio
    async def test_a_hold_is_sampled_too(self, world: World) -> None:
        """A ``hold()`` taking a slot, another waiting, and the release that promotes it."""
        runs = []
        for _ in range(2):
            run_id = new_run_id()
            request = CreateRunRequest(run_id=run_id, workflow=HISTORY_WF, args=b"")
            assert (await world.create_run(request)).run is not None
            runs.append(run_id)
        for run_id in runs:
            await _commit(world, run_id, SlotRequested(hold=1, key="gpu", value="g", limit=1))
        latest = (await _samples(world, "gpu"))[-1]
        assert (latest.ivalue, latest.holders, latest.waiters) == ("s:g", 1, 1)
        await _commit(world, runs[0], RunCompleted(result=b""))
        latest = (await _samples(world, "gpu"))[-1]
        assert (latest.holders, latest.waiters) == (1, 0)

    @pytest.mark.anyio
    async def test_a_window_after_the_samples_gets_the_level_it_opens_at(
        self, world: World
    ) -> None:
        """Each pair's newest sample before ``since`` comes with the window: the pair
        has stood at it since; a key with no samples has no history."""
        for value in ("a", "b", "b"):
            await _start(world, "tenant", value, 5)
        later = utcnow() + timedelta(minutes=5)
        carried = await world.slot_history("tenant", later, later + timedelta(hours=1))
        assert [(s.ivalue, s.holders) for s in carried] == [("s:a", 1), ("s:b", 2)]
        assert await world.slot_history("nobody", *_hour()) == []
        assert (
            await world.slot_history(
                "tenant", later - timedelta(hours=3), later - timedelta(hours=2)
            )
            == []
        )

    @pytest.mark.anyio
    async def test_wide_buckets_merge_their_samples(self, world: World) -> None:
        """Per bucket of ``width``: the last sample's levels and the most of the peaks,
        dated at the bucket's start."""
        runs = [await _start(world, "tenant", "a", 1) for _ in range(3)]  # 1 holds, 2 wait
        await world.cancel_run(runs[2], "done")
        await world.cancel_run(runs[0], "done")  # the second is promoted
        minutes = await _samples(world, "tenant")
        since = utcnow() - timedelta(hours=2)
        merged = await world.slot_history("tenant", since, since + timedelta(hours=3), 10800)
        assert len(merged) == 1, merged
        (bucket,) = merged
        assert bucket.minute == since
        assert (bucket.holders, bucket.waiters) == (minutes[-1].holders, minutes[-1].waiters)
        assert (bucket.holders, bucket.waiters) == (1, 0)
        assert (bucket.peak_holders, bucket.peak_waiters) == (1, 2)

    @pytest.mark.anyio
    async def test_bad_windows_and_keep_are_refused(self, world: World) -> None:
        now = utcnow()
        with pytest.raises(ValueError):
            await world.slot_history("tenant", now, now)
        with pytest.raises(ValueError):
            await world.slot_history("tenant", now, now - timedelta(minutes=1))
        naive = datetime.now(UTC).replace(tzinfo=None)
        with pytest.raises(TypeError):
            await world.slot_history("tenant", naive, naive + timedelta(minutes=1))
        with pytest.raises(ValueError):  # a sample is a minute's: buckets are whole minutes
            await world.slot_history("tenant", now - timedelta(hours=1), now, 90)
        with pytest.raises(ValueError):
            await world.prune_slot_history(-1)

    @pytest.mark.anyio
    async def test_pruning_keeps_a_pairs_newest_sample_while_someone_is_there(
        self, world: World
    ) -> None:
        """``keep=0``: every past sample may go, but a pair's newest when it shows
        holders or waiters (the chart needs the level it still stands at)."""
        gone = await _start(world, "tenant", "empty", 1)
        await world.cancel_run(gone, "done")
        await _start(world, "tenant", "held", 1)
        await _start(world, "tenant", "held", 1)
        assert await world.prune_slot_history(keep=3600) == 0
        assert {s.ivalue for s in await _samples(world, "tenant")} == {"s:empty", "s:held"}
        await anyio.sleep(0.01)  # the samples' minutes are past by at least this
        assert await world.prune_slot_history(keep=0, limit=1000) >= 1
        kept = await _samples(world, "tenant")
        assert [(s.ivalue, s.holders, s.waiters) for s in kept] == [("s:held", 1, 1)]
        assert await world.prune_slot_history(keep=0) == 0

    @pytest.mark.anyio
    async def test_concurrent_starts_leave_a_sample_that_matches_the_rows(
        self, world_factory: WorldFactory
    ) -> None:
        """Many starts at one pair from several world objects: the last sample is the
        pair's rows, and no sample ever saw more holders than the limit."""
        async with open_worlds(world_factory, 3) as opened:
            async with anyio.create_task_group() as group:
                for n in range(24):
                    group.start_soon(_start, opened[n % 3], "tenant", "hot", 4)
            rows = await opened[0].list_slots("tenant", "hot")
            history = await _samples(opened[1], "tenant")
        latest = history[-1]
        holding = sum(1 for row in rows if row.holding)
        assert (latest.holders, latest.waiters) == (holding, len(rows) - holding) == (4, 20)
        assert all(s.peak_holders <= 4 for s in history)
        assert max(s.peak_waiters for s in history) == 20
