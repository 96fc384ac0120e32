"""pytest configuration for the examples' tests: the worlds run on asyncio."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
