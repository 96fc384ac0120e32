"""``start_or_debounce`` through the public API, on every world."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from workflow import RunStatus, Worker, find_run, list_runs, workflow
from workflow.policies import start_or_debounce
from worlds.protocol import World
from worlds.types import RunCreated, RunStarted

pytestmark = pytest.mark.anyio


@workflow
async def sync_user(version: int) -> int:
    return version


async def test_calls_while_pending_replace_the_arguments_and_push_the_start(
    world: World,
) -> None:
    first = await start_or_debounce(
        sync_user, 1, key="user", value="u-1", delay=1.5, max_delay=30.0, world=world
    )
    for version in (2, 3):
        again = await start_or_debounce(
            sync_user, version, key="user", value="u-1", delay=1.5, max_delay=30.0, world=world
        )
        assert again.id == first.id
    assert len(await list_runs(world=world)) == 1
    async with Worker(world, [sync_user], poll_interval=0.05):
        await anyio.sleep(0.2)
        assert await first.status() is RunStatus.PENDING
        with anyio.fail_after(30):
            assert await first.result() == 3
    created, started = (await first.events())[:2]
    assert isinstance(created, RunCreated) and isinstance(started, RunStarted)
    assert (started.at - created.at).total_seconds() >= 1.45


async def test_max_delay_bounds_the_push(world: World) -> None:
    first = await start_or_debounce(
        sync_user, 1, key="user", value="u-2", delay=0.2, max_delay=0.6, world=world
    )
    async with Worker(world, [sync_user], poll_interval=0.05):
        with anyio.fail_after(30):
            version = 1
            while not (await first.status()).is_closed:
                version += 1
                run = await start_or_debounce(
                    sync_user,
                    version,
                    key="user",
                    value="u-2",
                    delay=0.2,
                    max_delay=0.6,
                    world=world,
                )
                await anyio.sleep(0.05)
    created, started = (await first.events())[:2]
    assert (started.at - created.at).total_seconds() < 10.0  # the push stopped at max_delay
    assert run.id != first.id or await first.status() is RunStatus.COMPLETED


async def test_a_started_holder_keeps_running_and_a_new_delayed_run_takes_the_pair(
    world: World,
) -> None:
    first = await start_or_debounce(
        sync_user, 1, key="user", value="u-3", delay=0, max_delay=0, world=world
    )
    async with Worker(world, [sync_user], poll_interval=0.05):
        with anyio.fail_after(30):
            assert await first.result() == 1
        second = await start_or_debounce(
            sync_user, 2, key="user", value="u-3", delay=0.1, max_delay=1, world=world
        )
        assert second.id != first.id
        holder = await find_run("user", "u-3", world=world)
        assert holder is not None and holder.id == second.id
        (claim,) = await second.claims()
        assert claim.generation == 2
        with anyio.fail_after(30):
            assert await second.result() == 2


async def test_bad_delays_are_refused(world: World) -> None:
    with pytest.raises(ValueError):
        await start_or_debounce(sync_user, 1, key="k", value="v", delay=5, max_delay=1, world=world)
    with pytest.raises(TypeError):
        await start_or_debounce(
            sync_user,
            1,
            key="k",
            value="v",
            delay="5",  # type: ignore[arg-type]
            max_delay=timedelta(1),
            world=world,
        )
    assert len(await list_runs(world=world)) == 0
