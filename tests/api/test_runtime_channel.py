"""The engine reaches user code through one channel: the runtime in a context variable.

Issue 12, item 5: client calls without ``world=`` inside a step find the
worker's world through ``workflow._runtime`` (no second context variable), and
that world is the default only while the step runs.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path

import pytest

import worlds
from workflow import Worker, get_run_metadata, start, step, workflow
from workflow.client import get_run, resolve_world
from worlds.protocol import World

pytestmark = pytest.mark.anyio


@workflow
async def child(x: int) -> int:
    return x + 1


@step
async def start_child(x: int) -> tuple[str, str]:
    run = await start(child, x)  # no world=: the worker's world
    meta = get_run_metadata()
    status = await get_run(meta.run_id).status()  # likewise
    return run.id, status.value


@workflow
async def parent(x: int) -> tuple[str, str]:
    return await start_child(x)


async def test_client_calls_in_a_step_use_the_workers_world(world: World) -> None:
    async with Worker(world, [parent, child]):
        run = await start(parent, 1, world=world)
        child_id, status = await run.result(timeout=20)
        assert await get_run(child_id, world=world).result(timeout=20) == 2
    assert status == "running"
    assert (await world.get_run(child_id)) is not None


async def test_the_workers_world_is_no_default_outside_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKFLOW_WORLD", f"sqlite:///{tmp_path / 'configured.db'}")
    served = worlds.open("memory://")
    async with served, Worker(served, [parent, child]):
        run = await start(parent, 1, world=served)
        await run.result(timeout=20)
        with pytest.raises(ValueError, match="world="):
            resolve_world(None)  # the configured world, which no worker here serves


def test_an_implicit_world_goes_away_with_its_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worlds opened implicitly are cached per loop, and the cache does not keep them."""
    monkeypatch.setenv("WORKFLOW_WORLD", "memory://")

    async def open_default() -> weakref.ref[World]:
        return weakref.ref(resolve_world(None))

    first = asyncio.run(open_default())
    gc.collect()
    assert first() is None  # a cache keyed by id(loop) would keep it for ever
