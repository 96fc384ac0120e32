"""Conformance: run streams, dense offsets, written once from workflow commands, closed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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
from worlds.types import CommitRequest, RunCompleted, RunStarted, StreamClosed, StreamWritten

__all__ = ["StreamCloseConformance", "StreamConformance"]


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

            async def seen() -> bool:
                return bool(await reader.read_stream(run.id, "p"))

            await _follower_wakes(reader, run.id, seen, writer.append_stream(run.id, "p", [b"x"]))

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


class StreamCloseConformance(ConformanceBase):
    """``StreamClosed`` commands (``close_stream``) and ``stream_closed``."""

    @pytest.mark.anyio
    async def test_a_closed_stream_takes_no_chunks_and_says_so(self, world: World) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        events = (
            RunStarted(),
            StreamWritten(name="progress", data=b"1"),
            StreamWritten(name="progress", data=b"2"),
            StreamClosed(name="progress"),
        )
        result = await world.commit(
            CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=events)
        )
        assert result.ok
        assert await world.stream_closed(run.id, "progress")
        assert not await world.stream_closed(run.id, "other")
        assert not await world.stream_closed(new_run_id(), "progress")
        # a step's append to the closed stream is refused; another stream of the run is open
        assert await world.append_stream(run.id, "progress", [b"late"]) is None
        assert await world.append_stream(run.id, "other", [b"x"]) == 0
        chunks = await world.read_stream(run.id, "progress")
        assert [(c.offset, c.data) for c in chunks] == [(0, b"1"), (1, b"2")]
        # the run is still open: closing a stream is not closing the run
        assert not (await world.get_run(run.id)).status.is_closed  # type: ignore[union-attr]

    @pytest.mark.anyio
    async def test_a_stream_closed_before_any_chunk_is_empty_and_closed(self, world: World) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        result = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), StreamClosed(name="s"), StreamClosed(name="s")),
            )
        )
        assert result.ok
        assert await world.stream_closed(run.id, "s")
        assert await world.read_stream(run.id, "s") == []
        assert await world.append_stream(run.id, "s", [b"x"]) is None

    @pytest.mark.anyio
    async def test_a_refused_commit_closes_nothing(self, world: World) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        assert (
            await world.commit(
                CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=(RunStarted(),))
            )
        ).ok
        stale = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id="another-worker",
                lease=item,
                events=(StreamClosed(name="s"),),
            )
        )
        assert not stale.ok
        assert not await world.stream_closed(run.id, "s")
        assert await world.append_stream(run.id, "s", [b"x"]) == 0

    @pytest.mark.anyio
    async def test_a_close_wakes_a_follower_on_the_run_topic(
        self, world_factory: WorldFactory
    ) -> None:
        async with open_worlds(world_factory, 2) as (writer, reader):
            run = await create_run(writer)
            item = await lease_one(writer, WF)
            request = CommitRequest(
                run_id=run.id,
                worker_id=WORKER,
                lease=item,
                events=(RunStarted(), StreamClosed(name="p")),
            )

            async def seen() -> bool:
                return await reader.stream_closed(run.id, "p")

            await _follower_wakes(reader, run.id, seen, writer.commit(request))


async def _follower_wakes(
    reader: World, run_id: str, seen: Callable[[], Awaitable[bool]], change: Awaitable[object]
) -> None:
    """A follower waiting on the run's topic in ``reader`` wakes and sees what ``change``
    (awaited in another world object) did: within 5 seconds, not by its 10 s timeout."""
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:

            async def follow() -> None:
                while not await seen():
                    await reader.wait(run_topic(run_id), 10.0)

            group.start_soon(follow)
            await anyio.sleep(0.1)
            await change
