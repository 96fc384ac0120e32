"""A step retried at once is leased again under the same work item id; the worker
must keep tracking (and renewing) the new lease while the old attempt winds down."""

from __future__ import annotations

from typing import cast

import anyio
import pytest

from workflow import Worker, get_step_metadata, start, step, workflow
from worlds.protocol import World
from worlds.types import CommitRequest, CommitResult

pytestmark = pytest.mark.anyio

last_attempts: list[int] = []


@step(max_retries=5, retry_delay=0.0)
async def flaky_twice(i: int) -> int:
    if get_step_metadata().attempt < 3:
        raise RuntimeError(f"attempt {get_step_metadata().attempt} of {i} fails")
    last_attempts.append(i)
    await anyio.sleep(5.0)  # outlives the lease (2 s) unless the worker renews it
    return i


@workflow
async def retries_at_once(i: int) -> int:
    return await flaky_twice(i)


class SlowAcks:
    """A world whose commits take a while to report back after they committed,
    so the worker's dispatcher can lease what a commit scheduled first."""

    def __init__(self, inner: World) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def commit(self, request: CommitRequest) -> CommitResult:
        result = await self._inner.commit(request)
        await anyio.sleep(0.2)
        return result


async def test_a_retry_leased_before_its_attempt_is_forgotten_keeps_its_slot(
    world: World,
) -> None:
    """A retry without delay can be leased again under the same item id before the
    failed attempt's task has finished; forgetting the old attempt must not drop the
    new lease (it used to: the new lease went unrenewed, expired mid-step, and the
    attempt ran again; or the new attempt failed with KeyError)."""
    last_attempts.clear()
    slow = cast(World, SlowAcks(world))
    # a lease long enough that a loaded machine renews it in time, however slowly
    async with Worker(slow, [retries_at_once], lease_seconds=2.0, poll_interval=0.05):
        runs = [await start(retries_at_once, i, world=world) for i in range(4)]
        for i, run in enumerate(runs):
            assert await run.result(timeout=30) == i
    assert sorted(last_attempts) == [0, 1, 2, 3]
