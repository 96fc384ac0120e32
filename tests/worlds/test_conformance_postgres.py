"""The PostgreSQL world against the conformance kit, in a fresh schema per test."""

from __future__ import annotations

from datetime import timedelta

import pytest

from worlds.postgres import PostgresWorld
from worlds.testing import ClockConformance, SkewedWorldFactory, WorldConformance, WorldFactory
from worlds.types import utcnow


class TestPostgresWorld(WorldConformance):
    """Each world object is its own pool and listener over one schema per test."""

    @pytest.fixture
    def world_factory(self, migrated_world_url: str) -> WorldFactory:
        return lambda: PostgresWorld(migrated_world_url)


class TestPostgresGeneralPath(WorldConformance):
    """Every commit on the general path (``fast_commits=False``): what the
    ``commit_run`` family leaves to it (a lost lease, a recheck) must hold there too."""

    @pytest.fixture
    def world_factory(self, migrated_world_url: str) -> WorldFactory:
        return lambda: PostgresWorld(migrated_world_url, fast_commits=False)


class TestPostgresClock(ClockConformance):
    """World objects whose process clock runs fast share a schema with a true one."""

    @pytest.fixture
    def world_factory(self, migrated_world_url: str) -> WorldFactory:
        return lambda: PostgresWorld(migrated_world_url)

    @pytest.fixture
    def skewed_world_factory(self, migrated_world_url: str) -> SkewedWorldFactory:
        def skewed(seconds: float) -> PostgresWorld:
            return PostgresWorld(
                migrated_world_url, clock=lambda: utcnow() + timedelta(seconds=seconds)
            )

        return skewed
