"""The PostgreSQL world against the conformance kit, in a fresh schema per test."""

from __future__ import annotations

import pytest

from worlds.postgres import PostgresWorld
from worlds.testing import WorldConformance, WorldFactory


class TestPostgresWorld(WorldConformance):
    """Each world object is its own pool and listener over one schema per test."""

    @pytest.fixture
    def world_factory(self, postgres_world_url: str) -> WorldFactory:
        return lambda: PostgresWorld(postgres_world_url)
