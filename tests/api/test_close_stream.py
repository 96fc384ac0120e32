"""``close_stream``: readers stop before the run ends (issue 28, item 3).

In the spirit of DBOS's ``test_streaming.py`` (write, close, read to the end
while the workflow is still running; a write after the close is an error): the
reader ends with every chunk though the run waits on, a write after the close
raises ``StreamClosedError`` in the workflow and in a step, and replay agrees.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from workflow import (
    NotInWorkflowError,
    RunStatus,
    Worker,
    close_stream,
    create_hook,
    get_run,
    replay,
    resume_hook,
    start,
    step,
    workflow,
    write_stream,
)
from workflow.errors import StreamClosedError
from worlds.protocol import World
from worlds.types import StreamClosed, StreamWritten

pytestmark = pytest.mark.anyio


@step
async def late_write(token: str) -> str:
    try:
        await write_stream(f"tokens-{token}", "too late")
    except StreamClosedError as exc:
        return f"refused: {exc}"
    return "written"


@workflow
async def tokens(token: str, count: int) -> list[str]:
    for n in range(count):
        await write_stream(f"tokens-{token}", {"n": n})
    await close_stream(f"tokens-{token}")
    await close_stream(f"tokens-{token}")  # a second close does nothing
    outcomes: list[str] = []
    try:
        await write_stream(f"tokens-{token}", "after close")
    except StreamClosedError as exc:
        outcomes.append(f"refused: {exc}")
    await write_stream(f"other-{token}", "still open")
    await create_hook(f"go-{token}")  # the run stays open while the reader finishes
    outcomes.append(await late_write(token))
    return outcomes


async def _read(world: World, run_id: str, name: str) -> list[Any]:
    return [value async for value in get_run(run_id, world=world).stream(name)]


async def test_readers_stop_at_the_close_while_the_run_is_open(world: World) -> None:
    async with Worker(world, [tokens, late_write]):
        run = await start(tokens, "a", 5, world=world)
        with anyio.fail_after(60):
            # two followers, one from the start and one from an offset: both end
            async with anyio.create_task_group() as group:
                read: dict[int, list[Any]] = {}

                async def follow(start_at: int) -> None:
                    stream = get_run(run.id, world=world).stream("tokens-a", start_at)
                    read[start_at] = [value async for value in stream]

                group.start_soon(follow, 0)
                group.start_soon(follow, 3)
        assert read[0] == [{"n": n} for n in range(5)]
        assert read[3] == [{"n": 3}, {"n": 4}]
        assert await run.status() in (RunStatus.PENDING, RunStatus.RUNNING)
        await resume_hook("go-a", None, world=world)
        outcomes = await run.result(timeout=60)
    assert len(outcomes) == 2
    assert all(o.startswith("refused: ") and "'tokens-a'" in o and "closed" in o for o in outcomes)
    assert await _read(world, run.id, "other-a") == ["still open"]
    events = await run.events()
    assert [e.name for e in events if isinstance(e, StreamClosed)] == ["tokens-a"]
    assert len([e for e in events if isinstance(e, StreamWritten)]) == 6
    await replay(tokens, events, run_id=run.id)


async def test_a_stream_closed_before_any_write_ends_its_reader_at_once(world: World) -> None:
    @workflow(name="close_first")
    async def close_first() -> None:
        await close_stream("empty")
        await create_hook("close-first-go")

    async with Worker(world, [close_first]):
        run = await start(close_first, world=world)
        with anyio.fail_after(60):
            while not await world.stream_closed(run.id, "empty"):
                await anyio.sleep(0.05)
            assert await _read(world, run.id, "empty") == []
        await resume_hook("close-first-go", None, world=world)
        await run.result(timeout=60)


async def test_close_stream_outside_a_workflow() -> None:
    with pytest.raises(ValueError, match="stream name"):
        await close_stream("")
    with pytest.raises(NotInWorkflowError):
        await close_stream("s")
