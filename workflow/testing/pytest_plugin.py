"""The pytest plugin of ``workflow.testing``: the ``workflow_env`` fixture.

Registered through the ``pytest11`` entry point, so installing the package is
enough. The fixture is an async generator: the async plugin that runs the test
(anyio's ``@pytest.mark.anyio``, or pytest-asyncio with ``asyncio_mode = auto``:
its strict mode handles only fixtures decorated with its own decorator) opens it
in the test's own event loop::

    @pytest.mark.anyio
    async def test_checkout(workflow_env):
        run = await workflow_env.start(checkout, "o-1", 1999)
        assert await run.result() == "paid"

``workflow_env.start`` registers the workflow it starts (and its module's
steps); to replace steps, open your own ``TestEnvironment(steps=...)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from workflow.testing._environment import TestEnvironment

__all__ = ["workflow_env"]


@pytest.fixture
async def workflow_env() -> AsyncIterator[TestEnvironment]:
    """An open ``TestEnvironment`` (memory world, skipping clock) for one test."""
    env = TestEnvironment()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio (trio, through anyio): one task opens and closes it
        async with env:
            yield env
        return
    # pytest-asyncio sets a fixture up and tears it down in different tasks, and the
    # environment's task group must be left in the task that entered it: a task of its own
    ready, done = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with env:
            ready.set()
            await done.wait()

    holder = loop.create_task(hold())
    waiting = loop.create_task(ready.wait())
    await asyncio.wait({holder, waiting}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.is_set():
        waiting.cancel()
        await holder  # raises why the environment could not open
    try:
        yield env
    finally:
        done.set()
        await holder
