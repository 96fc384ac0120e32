"""The example third-party world (examples/metered_world.py) passes the conformance kit."""

from __future__ import annotations

from pathlib import Path

import pytest

import worlds
from examples.metered_world import MeteredWorld, open_metered
from tests.conftest import unsynced
from worlds.testing import WorldConformance, WorldFactory


class TestMeteredWorld(WorldConformance):
    @pytest.fixture
    def world_factory(self, tmp_path: Path) -> WorldFactory:
        return lambda: open_metered(unsynced(f"metered+sqlite:///{tmp_path}/metered.db"))


def test_it_is_a_world_and_counts_calls() -> None:
    world = MeteredWorld(worlds.open("memory://"))
    assert isinstance(world, worlds.World)
    assert world.url == "metered+memory://"
