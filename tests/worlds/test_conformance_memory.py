"""The memory world against the conformance kit."""

from __future__ import annotations

import pytest

from worlds.memory import MemoryWorld
from worlds.testing import WorldConformance, WorldFactory


class TestMemoryWorld(WorldConformance):
    """``MemoryWorld`` keeps its data in one object, so every "connection" is that object."""

    @pytest.fixture
    def world_factory(self) -> WorldFactory:
        shared = MemoryWorld("memory://")
        return lambda: shared
