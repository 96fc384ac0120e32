"""Streams: ``write_stream`` in workflows and steps, ``Run.stream`` followed live."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.conftest import full_size
from workflow import (
    NotInWorkflowError,
    Worker,
    create_hook,
    get_run,
    get_step_metadata,
    resume_hook,
    start,
    step,
    workflow,
    write_stream,
)
from worlds.protocol import World
from worlds.types import StreamWritten

pytestmark = pytest.mark.anyio

CHUNKS = full_size(2_000, 10_000)
"""Chunks of the long stream: 10,000 (each a world transaction) with WORKFLOW_TEST_FULL=1."""


@step
async def burst(first: int, count: int) -> int:
    for n in range(first, first + count):
        await write_stream("numbers", n)
    return count


@workflow
async def producer(total: int, batch: int) -> int:
    written = 0
    while written < total:
        written += await burst(written, min(batch, total - written))
    return written


@step(max_retries=2, retry_delay=0.0)
async def flaky() -> str:
    attempt = get_step_metadata().attempt
    await write_stream("log", {"attempt": attempt})
    if attempt == 1:
        raise RuntimeError("first attempt fails")
    return "ok"


@workflow
async def progress() -> str:
    for pct in (0, 50):
        await write_stream("progress", {"pct": pct})
    await create_hook("progress-go")
    outcome = await flaky()
    await write_stream("progress", {"pct": 100})
    return outcome


@pytest.mark.slow  # CHUNKS step writes, each a world transaction
async def test_a_long_stream_is_read_completely_by_a_reader_that_reconnects(
    world: World,
) -> None:
    async with Worker(world, [producer, burst]):
        run = await start(producer, CHUNKS, 500, world=world)
        first: list[Any] = []
        async for value in get_run(run.id, world=world).stream("numbers"):
            first.append(value)
            if len(first) == CHUNKS * 4321 // 10_000:
                break  # the reader goes away mid-stream ...
        rest = [v async for v in get_run(run.id, world=world).stream("numbers", start=len(first))]
        assert await run.result(timeout=600) == CHUNKS
    assert first + rest == list(range(CHUNKS))


async def test_workflow_writes_are_written_once_and_step_writes_as_made(world: World) -> None:
    async with Worker(world, [progress, flaky], cache_size=0):  # replays from the log each task
        run = await start(progress, world=world)
        seen: list[Any] = []

        async def follow() -> None:
            async for value in run.stream("progress"):
                seen.append(value)

        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            with anyio.fail_after(20):
                while len(seen) < 2:
                    await anyio.sleep(0.02)
            await resume_hook("progress-go", None, world=world)
            assert await run.result(timeout=20) == "ok"
        # the follower ended by itself once the run closed
    assert seen == [{"pct": 0}, {"pct": 50}, {"pct": 100}]
    assert [v async for v in run.stream("log")] == [{"attempt": 1}, {"attempt": 2}]
    written = [e.name for e in await run.events() if isinstance(e, StreamWritten)]
    assert written == ["progress", "progress", "progress"]
    assert [v async for v in run.stream("progress", start=2)] == [{"pct": 100}]


async def test_bad_stream_calls_are_refused(world: World) -> None:
    with pytest.raises(NotInWorkflowError):
        await write_stream("progress", 1)
    with pytest.raises(ValueError):
        await write_stream("", 1)
    with pytest.raises(ValueError):
        [v async for v in get_run("r", world=world).stream("progress", start=-1)]
