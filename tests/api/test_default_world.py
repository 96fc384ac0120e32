"""The default world cannot silently differ from the one in-process Workers serve.

Issue 10, item 13: ``start(fn)`` without ``world=`` beside ``Worker(memory_world)``
wrote to ``.workflow/world.db`` and ``result()`` timed out. Now a client call
that would choose the default world implicitly, while the Workers of this
process serve other storage, raises a ``ValueError`` naming ``world=``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import worlds
from workflow import Worker, get_run, list_runs, start, step, workflow
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@step
async def double(x: int) -> int:
    return 2 * x


@workflow
async def twice(x: int) -> int:
    return await double(x)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty directory with no world configured; return that directory."""
    directory = tmp_path / "cwd"
    directory.mkdir()
    monkeypatch.chdir(directory)
    monkeypatch.delenv("WORKFLOW_WORLD", raising=False)
    return directory


async def test_start_without_world_beside_a_worker_on_another_world_is_refused(
    world: World, elsewhere: Path
) -> None:
    async with Worker(world, [twice]):
        with pytest.raises(ValueError, match=r"world=world") as info:
            await start(twice, 21)
        with pytest.raises(ValueError, match=r"world=world"):
            await list_runs()
        with pytest.raises(ValueError, match=r"world=world"):
            await get_run("some-run").status()
        # the explicit call works, and nothing was written to the default world
        run = await start(twice, 21, world=world)
        assert await run.result(timeout=15) == 42
    message = str(info.value)
    assert "sqlite:///.workflow/world.db" in message and repr(world) in message
    assert not (elsewhere / ".workflow").exists()


async def test_the_default_world_is_used_again_once_the_worker_stopped(
    world: World, elsewhere: Path
) -> None:
    async with Worker(world, [twice]):
        pass
    run = await start(twice, 21)
    assert [r.id for r in await list_runs()] == [run.id]
    assert (elsewhere / ".workflow" / "world.db").exists()
    async with worlds.open() as default:
        assert await get_run(run.id, world=default).status() is not None


async def test_a_worker_on_the_configured_storage_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/shared.db"
    monkeypatch.setenv("WORKFLOW_WORLD", url)
    async with worlds.open(url) as world, Worker(world, [twice]):
        run = await start(twice, 21)  # another object over the same file: no error
        assert await run.result(timeout=15) == 42
        assert [r.id for r in await list_runs(world=world)] == [run.id]


async def test_a_configured_memory_world_is_not_the_workers_memory_world(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKFLOW_WORLD", "memory://")
    async with worlds.open("memory://") as world, Worker(world, [twice]):
        with pytest.raises(ValueError, match=r"\$WORKFLOW_WORLD"):
            await start(twice, 21)
