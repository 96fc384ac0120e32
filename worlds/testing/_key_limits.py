"""Conformance of key limits: a cap over every value of a key, fair shares and burst."""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World
from worlds.testing._base import ConformanceBase, WorldFactory, lease_all, new_run_id, open_worlds
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    CreateRunResult,
    Limit,
    OnFull,
    RunCompleted,
    RunStatus,
)

__all__ = ["KeyLimitConformance"]

KEY_WF = "conformance-key-limits"
"""The workflow name of the kit's key-limited runs."""


async def _start(
    world: World, value: str, limit: int = 10, *, burst: int = 0, on_full: OnFull = "queue"
) -> CreateRunResult:
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=KEY_WF,
        args=b"",
        attributes={"tenant": value},
        limits={"tenant": Limit(limit=limit, on_full=on_full, burst=burst)},
    )
    return await world.create_run(request)


async def _run(world: World, value: str, limit: int = 10, *, burst: int = 0) -> str:
    result = await _start(world, value, limit, burst=burst)
    assert result.run is not None, f"the start was refused: {result.conflict!r}"
    return result.run.id


async def _holding(world: World, values: list[str]) -> dict[str, list[str]]:
    """The holders of each value's pair."""
    return {
        value: [s.run_id for s in await world.list_slots("tenant", value) if s.holding]
        for value in values
    }


async def _held(world: World, runs: list[str]) -> set[str]:
    return {r for r in runs if any(s.holding for s in await world.run_slots(r))}


async def _close(world: World, run_id: str) -> None:
    done = RunCompleted(result=b"")
    result = await world.commit(CommitRequest(run_id=run_id, worker_id="kit", events=(done,)))
    assert result.ok and result.status.is_closed, f"closing {run_id} failed: {result!r}"


async def _admissions(world: World, runs: dict[str, str], count: int) -> list[str]:
    """Close the oldest holder ``count`` times; the values admitted after each close."""
    held = await _held(world, list(runs))
    order: list[str] = []
    for _ in range(count):
        oldest = next(r for r in runs if r in held)
        await _close(world, oldest)
        del runs[oldest]
        now = await _held(world, list(runs))
        order += sorted(runs[r] for r in now - held)
        held = now
    return order


class KeyLimitConformance(ConformanceBase):
    """``World.set_key_limit``: the cap, weighted round-robin, burst, changes and input."""

    @pytest.mark.anyio
    async def test_a_key_limit_caps_every_value_together(self, world: World) -> None:
        """Runs need a slot of their pair and one of the key: three values of limit 10
        under a key limit of 3 hold three slots in all; the others wait, with no work."""
        stored = await world.set_key_limit("tenant", 3)
        assert stored is not None and stored.limit == 3
        runs = [await _run(world, value) for value in ["a"] * 4 + ["b"] * 2 + ["c"]]
        held = await _held(world, runs)
        assert held == set(runs[:3])
        woken = {item.run_id for item in await lease_all(world, {KEY_WF})}
        assert woken == held
        for run_id in set(runs) - held:
            record = await world.get_run(run_id)
            assert record is not None and record.status is RunStatus.PENDING
        found = await world.get_key_limit("tenant")
        assert found is not None and found.limit == 3 and found.held == 3
        assert await world.get_key_limit("other") is None

    @pytest.mark.anyio
    async def test_a_value_with_one_waiter_is_not_starved(self, world: World) -> None:
        """Freed key slots alternate between the values waiting: a value with one
        waiting run goes next, although another value has many in line before it."""
        await world.set_key_limit("tenant", 1)
        runs = {await _run(world, "a"): "a" for _ in range(6)}
        runs[await _run(world, "b")] = "b"
        assert await _admissions(world, runs, 6) == ["b", "a", "a", "a", "a", "a"]

    @pytest.mark.anyio
    async def test_the_keys_line_passes_full_pairs_and_drops_values_gone(
        self, world: World
    ) -> None:
        """The key's next value is read from the head of its line: values whose pairs
        are full are passed over however many are ahead (more than one page of the
        line), and a value whose waiters all left takes no turn."""
        await world.set_key_limit("tenant", 20)
        values = [f"v{n:02}" for n in range(12)]
        first = {value: await _run(world, value, 1) for value in values}
        second = {value: await _run(world, value, 1) for value in values}
        assert await _held(world, list(first.values())) == set(first.values())
        await _close(world, first["v11"])
        assert (await _holding(world, ["v11"]))["v11"] == [second["v11"]]
        await world.cancel_run(second["v00"], "kit")
        await _close(world, first["v00"])
        assert (await _holding(world, values[:2])) == {"v00": [], "v01": [first["v01"]]}
        assert await _held(world, list(second.values())) == {second["v11"]}
        again = await _run(world, "v00", 1)
        assert await _held(world, [again]) == {again}
        await _close(world, first["v05"])
        assert await _held(world, list(second.values())) == {second["v11"], second["v05"]}

    @pytest.mark.anyio
    async def test_weights_order_admissions(self, world: World) -> None:
        """A value of weight 2 is served twice as often as one of weight 1 while both
        wait (stride scheduling; equal passes go by value)."""
        await world.set_key_limit("tenant", 1, {"a": 2})
        runs: dict[str, str] = {}
        for _ in range(8):
            runs[await _run(world, "a")] = "a"
            runs[await _run(world, "b")] = "b"
        order = ["a", *await _admissions(world, runs, 11)]
        assert order[:12] == ["a", "b", "a", "a", "b", "a", "a", "b", "a", "a", "b", "a"]
        assert order[:9].count("a") == 6

    @pytest.mark.anyio
    async def test_burst_takes_only_capacity_nobody_else_waits_for(self, world: World) -> None:
        """``burst`` lets a pair hold slots above its limit while the key has room;
        a value under its own limit is served before a burst slot is handed out."""
        await world.set_key_limit("tenant", 4)
        bursting = [await _run(world, "a", 1, burst=2) for _ in range(5)]
        assert len((await _holding(world, ["a"]))["a"]) == 3
        b0, b1 = await _run(world, "b", 2), await _run(world, "b", 2)
        assert await _holding(world, ["a", "b"]) == {"a": bursting[:3], "b": [b0]}
        await _close(world, bursting[0])
        assert await _holding(world, ["a", "b"]) == {"a": bursting[1:3], "b": [b0, b1]}
        await _close(world, b0)  # nobody else waits now: a burst slot for "a"
        assert await _holding(world, ["a", "b"]) == {"a": bursting[1:4], "b": [b1]}

    @pytest.mark.anyio
    async def test_burst_needs_a_key_limit(self, world: World) -> None:
        """Without a key limit there is no shared capacity: a pair holds its limit."""
        runs = [await _run(world, "a", 1, burst=2) for _ in range(3)]
        assert await _held(world, runs) == {runs[0]}

    @pytest.mark.anyio
    async def test_raising_or_removing_the_limit_admits_waiters(self, world: World) -> None:
        """A raised limit promotes whom it has room for in the same operation; removing
        it leaves each pair's own limit; lowering it takes no slot away."""
        await world.set_key_limit("tenant", 1)
        runs = [await _run(world, value, 2) for value in ("a", "a", "a", "b", "b")]
        assert await _held(world, runs) == {runs[0]}
        await world.set_key_limit("tenant", 3)
        assert await _held(world, runs) == {runs[0], runs[1], runs[3]}
        await world.set_key_limit("tenant", 1)
        assert await _held(world, runs) == {runs[0], runs[1], runs[3]}
        await _close(world, runs[0])
        assert await _held(world, runs[1:]) == {runs[1], runs[3]}
        assert await world.set_key_limit("tenant", None) is None
        assert await world.get_key_limit("tenant") is None
        assert await _held(world, runs[1:]) == {runs[1], runs[2], runs[3], runs[4]}

    @pytest.mark.anyio
    async def test_a_full_key_refuses_on_full_fail(self, world: World) -> None:
        """``on_full="fail"`` at a full key: the conflict names a key holder and the
        key's limit, and nothing is written."""
        await world.set_key_limit("tenant", 2)
        holders = [await _run(world, "a"), await _run(world, "b")]
        result = await _start(world, "c", on_full="fail")
        assert result.run is None and result.conflict is not None
        assert result.conflict.key == "tenant" and result.conflict.value == "c"
        assert result.conflict.limit == 2 and result.conflict.holder_run_id in holders
        assert await world.list_slots("tenant", "c") == []

    @pytest.mark.anyio
    async def test_a_refusal_at_a_pair_with_only_a_line_names_a_key_holder(
        self, world: World
    ) -> None:
        """A pair with room whose runs wait because the key is full refuses an
        ``on_full="fail"`` start with the key's limit and a key holder, never the
        waiter (whose run holds nothing), and nothing is written."""
        holder = await _run(world, "a")
        await world.set_key_limit("tenant", 1)
        waiter = await _run(world, "b")
        assert await _held(world, [holder, waiter]) == {holder}
        result = await _start(world, "b", on_full="fail")
        assert result.run is None and result.conflict is not None
        assert result.conflict.holder_run_id == holder, result.conflict
        assert result.conflict.limit == 1
        assert [s.run_id for s in await world.list_slots("tenant", "b")] == [waiter]

    @pytest.mark.anyio
    async def test_bad_input_writes_nothing(self, world: World) -> None:
        """A limit that is not 1-1000000, a weight that is no positive number or a
        reserved key is refused before anything is written."""
        for key, limit, weights in [
            ("tenant", 0, None),
            ("tenant", 10, {"a": -1.0}),
            ("tenant", 10, {"a": float("inf")}),
            ("$name", 10, None),
            ("", 10, None),
        ]:
            with pytest.raises(ValueError):
                await world.set_key_limit(key, limit, weights)
        with pytest.raises(TypeError):
            await world.set_key_limit("tenant", 2.5)  # type: ignore[arg-type]
        assert await world.get_key_limit("tenant") is None

    @pytest.mark.anyio
    async def test_the_cap_holds_under_contention(self, world_factory: WorldFactory) -> None:
        """Many callers over several connections start runs of five values and close
        holders at once: the key's slots held never exceed its limit, and every run
        is served."""
        limit, values = 3, ["a", "b", "c", "d", "e"]
        async with open_worlds(world_factory, 4) as opened:
            await opened[0].set_key_limit("tenant", limit)
            created: list[str] = []
            samples: list[int] = []

            async def starter(index: int) -> None:
                created.append(await _run(opened[index % 4], values[index % 5], 2))

            async def sampler() -> None:
                for _ in range(30):
                    found = await opened[3].get_key_limit("tenant")
                    assert found is not None
                    samples.append(found.held)
                    await anyio.sleep(0.005)

            async with anyio.create_task_group() as group:
                group.start_soon(sampler)
                for index in range(25):
                    group.start_soon(starter, index)
            served: set[str] = set()
            with anyio.fail_after(60):
                while len(served) < len(created):
                    holders = [r for rs in (await _holding(opened[1], values)).values() for r in rs]
                    samples.append(len(holders))
                    assert len(holders) == min(limit, len(created) - len(served))
                    async with anyio.create_task_group() as group:
                        for n, holder in enumerate(holders):
                            group.start_soon(_close, opened[n % 4], holder)
                    served |= set(holders)
            assert max(samples) <= limit
            assert sorted(served) == sorted(created)
