"""Conformance: ``async with`` a world again, nested or one block after another."""

from __future__ import annotations

import pytest

from worlds.testing._base import ConformanceBase, WorldFactory, create_run

__all__ = ["LifecycleConformance"]


class LifecycleConformance(ConformanceBase):
    """The lifecycle rule (``Lifecycle.close``): entering opens a closed world,
    entries are counted, the last exit closes."""

    @pytest.mark.anyio
    async def test_a_world_is_entered_again_after_its_block_ended(
        self, world_factory: WorldFactory
    ) -> None:
        world = world_factory()
        async with world:
            run = await create_run(world)
        async with world as again:
            assert again is world
            record = await world.get_run(run.id)
            assert record is not None and record.id == run.id, "the second block sees the run"
            await create_run(world)

    @pytest.mark.anyio
    async def test_a_nested_block_leaves_the_outer_block_its_world(
        self, world_factory: WorldFactory
    ) -> None:
        world = world_factory()
        async with world:
            async with world:
                run = await create_run(world)
            record = await world.get_run(run.id)  # the inner exit did not close it
            assert record is not None and record.id == run.id

    @pytest.mark.anyio
    async def test_a_closed_world_opens_on_the_next_entry(
        self, world_factory: WorldFactory
    ) -> None:
        world = world_factory()
        async with world:
            run = await create_run(world)
            await world.close()  # inside the block: closed now, and the exit is no error
        async with world:
            record = await world.get_run(run.id)
            assert record is not None and record.id == run.id
