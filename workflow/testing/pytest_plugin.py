"""The pytest plugin of ``workflow.testing``: the ``workflow_env`` fixture.

Registered through the ``pytest11`` entry point, so installing the package is
enough. The fixture is an async generator: the async plugin that runs the test
(anyio's ``@pytest.mark.anyio``, or pytest-asyncio with ``asyncio_mode = auto``
or the test marked ``asyncio``) opens it in the test's own event loop::

    @pytest.mark.anyio
    async def test_checkout(workflow_env):
        run = await workflow_env.start(checkout, "o-1", 1999)
        assert await run.result() == "paid"

``workflow_env.start`` registers the workflow it starts (and its module's
steps); to replace steps, open your own ``TestEnvironment(steps=...)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from workflow.testing._environment import TestEnvironment

__all__ = ["workflow_env"]


@pytest.fixture
async def workflow_env() -> AsyncIterator[TestEnvironment]:
    """An open ``TestEnvironment`` (memory world, skipping clock) for one test."""
    async with TestEnvironment() as env:
        yield env
