"""The system tests' PostgreSQL worlds wait longer for a statement.

These tests run several OS processes against one world, beside the suite's other
workers on a 2-core machine: a statement can wait on the CPU, and on the other
processes' locks, well past the world's default ``command_timeout`` (4 s), which
is a hang detector, not what these tests check. So their worlds allow 30 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import drop_schema, fresh_schema, with_schema


@pytest.fixture
def postgres_world_url(postgres_url: str) -> Iterator[str]:
    """A PostgreSQL world in a fresh schema (dropped after the test), statements up to 30 s."""
    url = with_schema(postgres_url, fresh_schema()) + "&command_timeout=30"
    yield url
    drop_schema(url)
