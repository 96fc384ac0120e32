"""Conformance: run streams, dense offsets, written once from workflow commands."""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World, run_topic
from worlds.testing._base import (
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    create_run,
    lease_one,
    new_run_id,
    open_worlds,
)
from worlds.types import CommitRequest, RunCompleted, RunStarted, StreamWritten

__all__ = ["StreamConformance"]


class StreamConformance(ConformanceBase):
    """``append_stream``/``read_stream`` and ``StreamWritten`` commands."""

    @pytest.mark.anyio
    async def test_chunks_get_dense_offsets_per_stream(self, world: World) -> None:
        run = await create_run(world)
        assert await world.append_stream(run.id, "progress", [b"a", b"b"]) == 0
        assert await world.append_stream(run.id, "progress", [b"c"]) == 2
        assert await world.append_stream(run.id, "other", [b"x"]) == 0
        chunks = await world.read_stream(run.id, "progress")
        assert [(c.offset, c.data) for c in chunks] == [(0, b"a"), (1, b"b"), (2, b"c")]
        assert chunks[0].at.utcoffset() is not None
        tail = await world.read_stream(run.id, "progress", start=1, limit=1)
        assert [(c.offset, c.data) for c in tail] == [(1, b"b")]
        assert await world.read_stream(run.id, "missing") == []
        assert await world.read_stream(new_run_id(), "progress") == []

    @pytest.mark.anyio
    async def test_a_workflow_command_writes_its_chunk_with_the_commit(self, world: World) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        written = StreamWritten(name="progress", data=b"40%")
        result = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id=WORKER, lease=item, events=(RunStarted(), written)
            )
        )
        assert result.ok
        assert [c.data for c in await world.read_stream(run.id, "progress")] == [b"40%"]
        # the same command refused (lost lease): nothing is written
        again = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=(written,))
        )
        assert not again.ok
        assert len(await world.read_stream(run.id, "progress")) == 1

    @pytest.mark.anyio
    async def test_a_closed_or_unknown_run_takes_no_chunks(self, world: World) -> None:
        run = await create_run(world)
        await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, events=(RunCompleted(result=b""),))
        )
        assert await world.append_stream(run.id, "progress", [b"late"]) is None
        assert await world.read_stream(run.id, "progress") == []
        assert await world.append_stream(new_run_id(), "progress", [b"x"]) is None
        with pytest.raises(ValueError):
            await world.append_stream(run.id, "", [b"x"])

    @pytest.mark.anyio
    async def test_an_append_wakes_a_waiter_on_the_run_topic(
        self, world_factory: WorldFactory
    ) -> None:
        async with open_worlds(world_factory, 2) as (writer, reader):
            run = await create_run(writer)
            with anyio.fail_after(5):
                async with anyio.create_task_group() as group:

                    async def follow() -> None:
                        while not await reader.read_stream(run.id, "p"):
                            await reader.wait(run_topic(run.id), 10.0)

                    group.start_soon(follow)
                    await anyio.sleep(0.1)
                    await writer.append_stream(run.id, "p", [b"x"])

    @pytest.mark.anyio
    async def test_concurrent_appends_keep_offsets_dense(self, world_factory: WorldFactory) -> None:
        async with open_worlds(world_factory, 3) as opened:
            run = await create_run(opened[0])

            async def write(n: int) -> None:
                await opened[n % 3].append_stream(run.id, "s", [b"%d" % n, b"%d" % n])

            async with anyio.create_task_group() as group:
                for n in range(30):
                    group.start_soon(write, n)
            chunks = await opened[0].read_stream(run.id, "s")
            assert [c.offset for c in chunks] == list(range(60))
            # each append's chunks are adjacent
            pairs = [chunks[i].data == chunks[i + 1].data for i in range(0, 60, 2)]
            assert all(pairs)
