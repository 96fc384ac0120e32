"""Conformance of schedule storage: create, read, compare-and-set, lease, delete.

A world stores schedules opaquely (``ScheduleRecord.spec`` is the SDK's) and
keeps three promises: a schedule id is taken once; every write after creation
is a compare-and-set on ``version``; a due schedule is leased to one worker
at a time, by the world's clock, until its lease expires or an update
releases it.
"""

from __future__ import annotations

from datetime import timedelta

import anyio
import msgspec
import pytest

from worlds.protocol import World
from worlds.testing._base import SHORT_DELAY, ConformanceBase, WorldFactory, open_worlds
from worlds.types import ScheduleRecord, utcnow

__all__ = ["ScheduleConformance"]

SCHED_WF = "conformance-sched-wf"


def _record(schedule_id: str, *, due_in: float | None = 0.0, **fields: object) -> ScheduleRecord:
    """A schedule of ``SCHED_WF`` due ``due_in`` seconds from now (``None``: never)."""
    wake = None if due_in is None else utcnow() + timedelta(seconds=due_in)
    record = ScheduleRecord(
        id=schedule_id, workflow=SCHED_WF, spec=b"\x01spec", next_fire_at=wake, wake_at=wake
    )
    return msgspec.structs.replace(record, **fields)


async def _lease(world: World, worker: str, seconds: float = 30.0) -> list[str]:
    got = await world.lease_schedules(worker, names=[SCHED_WF], limit=100, lease_seconds=seconds)
    return [record.id for record in got.schedules]


class ScheduleConformance(ConformanceBase):
    """Schedules: stored once, changed by compare-and-set, leased to one worker at a time."""

    @pytest.mark.anyio
    async def test_create_then_get_gives_the_record_at_version_1(self, world: World) -> None:
        wanted = _record("s.1:a-b_c", due_in=60.0, paused=True, note="why", spec=b"\x00\xff")
        stored = await world.create_schedule(wanted)
        assert stored.version == 1
        assert stored.created_at == stored.updated_at
        assert stored.created_at.utcoffset() == timedelta(0)
        got = await world.get_schedule("s.1:a-b_c")
        assert got == stored
        assert (got.workflow, got.spec, got.paused, got.note) == (
            SCHED_WF,
            b"\x00\xff",
            True,
            "why",
        )
        assert got.next_fire_at == wanted.next_fire_at and got.wake_at == wanted.wake_at
        assert await world.get_schedule("missing") is None

    @pytest.mark.anyio
    async def test_a_duplicate_id_is_refused_and_the_first_kept(self, world: World) -> None:
        first = await world.create_schedule(_record("dup", spec=b"first"))
        with pytest.raises(ValueError, match="already exists"):
            await world.create_schedule(_record("dup", spec=b"second"))
        assert await world.get_schedule("dup") == first

    @pytest.mark.anyio
    @pytest.mark.parametrize("bad_id", ["", "has space", "x" * 192, "slash/no", "é"])
    async def test_a_malformed_id_is_refused_and_nothing_written(
        self, world: World, bad_id: str
    ) -> None:
        with pytest.raises(ValueError, match="schedule id"):
            await world.create_schedule(_record(bad_id))
        assert await world.list_schedules() == []

    @pytest.mark.anyio
    async def test_list_is_in_id_order_and_pages(self, world: World) -> None:
        for name in ["c", "a", "e", "b", "d"]:
            await world.create_schedule(_record(name))
        assert [r.id for r in await world.list_schedules()] == ["a", "b", "c", "d", "e"]
        assert [r.id for r in await world.list_schedules(limit=2)] == ["a", "b"]
        assert [r.id for r in await world.list_schedules(after="b", limit=2)] == ["c", "d"]
        assert await world.list_schedules(after="e") == []

    @pytest.mark.anyio
    async def test_update_is_a_compare_and_set_on_version(self, world: World) -> None:
        stored = await world.create_schedule(_record("cas", due_in=60.0))
        paused = msgspec.structs.replace(stored, paused=True, note="n", workflow="other")
        first = await world.update_schedule(paused)
        assert first is not None and first.version == 2
        assert (first.paused, first.note, first.workflow) == (True, "n", SCHED_WF)
        assert first.created_at == stored.created_at and first.updated_at >= stored.updated_at
        stale = msgspec.structs.replace(stored, paused=False, note="stale")
        assert await world.update_schedule(stale) is None
        assert await world.get_schedule("cas") == first
        gone = msgspec.structs.replace(stored, id="never-created")
        assert await world.update_schedule(gone) is None

    @pytest.mark.anyio
    async def test_concurrent_updates_at_one_version_let_exactly_one_win(
        self, world_factory: WorldFactory
    ) -> None:
        async with open_worlds(world_factory, 4) as handles:
            stored = await handles[0].create_schedule(_record("race", due_in=60.0))
            wins: list[str] = []

            async def update(world: World, note: str) -> None:
                new = msgspec.structs.replace(stored, note=note)
                if await world.update_schedule(new) is not None:
                    wins.append(note)

            async with anyio.create_task_group() as group:
                for i in range(16):
                    group.start_soon(update, handles[i % 4], f"n{i}")
            assert len(wins) == 1
            final = await handles[0].get_schedule("race")
            assert final is not None and final.version == 2 and final.note == wins[0]

    @pytest.mark.anyio
    async def test_lease_gives_due_unpaused_schedules_of_the_names_asked(
        self, world: World
    ) -> None:
        await world.create_schedule(_record("due"))
        await world.create_schedule(_record("later", due_in=3600.0))
        await world.create_schedule(_record("paused", paused=True))
        await world.create_schedule(_record("done", due_in=None))
        await world.create_schedule(_record("other", workflow="another-wf"))
        got = await world.lease_schedules("w1", names=[SCHED_WF], limit=10, lease_seconds=30)
        assert [r.id for r in got.schedules] == ["due"]
        assert got.now.utcoffset() == timedelta(0)
        later = await world.get_schedule("later")
        assert later is not None and got.next_wake_at == later.wake_at
        assert await _lease(world, "w2") == []
        other = await world.lease_schedules("w3", names=["another-wf"], limit=10, lease_seconds=30)
        assert [r.id for r in other.schedules] == ["other"]

    @pytest.mark.anyio
    async def test_a_lease_limit_is_kept_and_the_rest_reported_due_now(self, world: World) -> None:
        for i in range(5):
            await world.create_schedule(_record(f"s{i}", due_in=-1.0 + i * 0.01))
        got = await world.lease_schedules("w1", names=[SCHED_WF], limit=2, lease_seconds=30)
        assert [r.id for r in got.schedules] == ["s0", "s1"]
        assert got.next_wake_at is not None and got.next_wake_at <= got.now
        assert sorted(await _lease(world, "w2")) == ["s2", "s3", "s4"]

    @pytest.mark.anyio
    async def test_a_lease_expires_and_an_update_releases_it(self, world: World) -> None:
        await world.create_schedule(_record("a"))
        await world.create_schedule(_record("b"))
        # held leases are long: a loaded machine can take a short one's time between
        # two calls that expect it held
        assert sorted(await _lease(world, "w1")) == ["a", "b"]
        assert await _lease(world, "w2") == []
        stored = await world.get_schedule("a")
        assert stored is not None
        assert await world.update_schedule(stored) is not None  # releases a, still due
        assert await _lease(world, "w2") == ["a"]
        await world.create_schedule(_record("c"))
        assert await _lease(world, "w1", seconds=SHORT_DELAY) == ["c"]
        await anyio.sleep(SHORT_DELAY + 0.1)
        assert await _lease(world, "w3") == ["c"]  # expired; a and b are still held

    @pytest.mark.anyio
    async def test_pause_stops_leases_and_unpause_resumes_them(self, world: World) -> None:
        stored = await world.create_schedule(_record("p"))
        paused = await world.update_schedule(msgspec.structs.replace(stored, paused=True))
        assert paused is not None
        assert await _lease(world, "w1") == []
        resumed = await world.update_schedule(msgspec.structs.replace(paused, paused=False))
        assert resumed is not None and not resumed.paused
        assert await _lease(world, "w1") == ["p"]

    @pytest.mark.anyio
    async def test_many_workers_lease_each_due_schedule_once(
        self, world_factory: WorldFactory
    ) -> None:
        async with open_worlds(world_factory, 4) as handles:
            for i in range(40):
                await handles[0].create_schedule(_record(f"m{i:02d}"))
            taken: list[str] = []

            async def lease(world: World, worker: str) -> None:
                for _ in range(3):
                    taken.extend(await _lease(world, worker))

            async with anyio.create_task_group() as group:
                for i in range(8):
                    group.start_soon(lease, handles[i % 4], f"w{i}")
            assert sorted(taken) == [f"m{i:02d}" for i in range(40)]

    @pytest.mark.anyio
    async def test_delete_removes_the_schedule_once(self, world: World) -> None:
        await world.create_schedule(_record("gone"))
        assert await world.delete_schedule("gone") is True
        assert await world.delete_schedule("gone") is False
        assert await world.get_schedule("gone") is None
        assert await _lease(world, "w1") == []
        again = await world.create_schedule(_record("gone"))
        assert again.version == 1
