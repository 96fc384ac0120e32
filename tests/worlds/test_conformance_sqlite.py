"""The SQLite world against the conformance kit."""

from __future__ import annotations

from pathlib import Path

import pytest

from worlds.sqlite import SqliteWorld
from worlds.testing import WorldConformance, WorldFactory


class TestSqliteWorld(WorldConformance):
    """Each world object is its own connection to one database file per test."""

    @pytest.fixture
    def world_factory(self, tmp_path: Path) -> WorldFactory:
        return lambda: SqliteWorld(f"sqlite:///{tmp_path}/w.db")
