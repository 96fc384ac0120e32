"""Shared fixtures: every runtime test runs against each built-in world."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

import worlds
from worlds.protocol import World

WORLD_KINDS = ["memory", "sqlite"] if importlib.util.find_spec("worlds.sqlite") else ["memory"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def world_url(kind: str, tmp_path: Path) -> str:
    """A URL for a fresh, empty world of ``kind``."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/world.db"
    raise ValueError(kind)


@pytest.fixture(params=WORLD_KINDS)
def world_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_world(world_kind: str, tmp_path: Path) -> Callable[[], World]:
    """Open a world over this test's storage (memory worlds are one shared object)."""
    url = world_url(world_kind, tmp_path)
    shared = worlds.open(url) if world_kind == "memory" else None
    return lambda: shared if shared is not None else worlds.open(url)


@pytest.fixture
async def world(make_world: Callable[[], World]) -> AsyncIterator[World]:
    opened = make_world()
    async with opened:
        yield opened
