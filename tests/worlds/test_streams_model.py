"""Stream offsets against a model: any mix of appends and reads, on the memory world."""

from __future__ import annotations

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from worlds.memory import MemoryWorld
from worlds.types import CreateRunRequest

_appends = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(st.binary(max_size=8), max_size=5)),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(appends=_appends, start=st.integers(0, 40), limit=st.integers(0, 40))
def test_offsets_are_dense_and_reads_are_slices_of_the_model(
    appends: list[tuple[str, list[bytes]]], start: int, limit: int
) -> None:
    async def scenario() -> None:
        async with MemoryWorld() as world:
            await world.create_run(CreateRunRequest(run_id="r", workflow="w", args=b""))
            model: dict[str, list[bytes]] = {}
            for name, chunks in appends:
                first = await world.append_stream("r", name, chunks)
                assert first == len(model.get(name, []))
                model.setdefault(name, []).extend(chunks)
            for name in ("a", "b", "c"):
                read = await world.read_stream("r", name, start, limit)
                assert [c.data for c in read] == model.get(name, [])[start : start + limit]
                assert [c.offset for c in read] == list(range(start, start + len(read)))

    anyio.run(scenario)
