"""Group commit: the commits of runs ready in the same loop turn go to the world as
one ``commit_many``, each caller gets its own outcome, and a failing batch harms
nobody: a world that is unavailable is retried, any other failure per request."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import pytest

import worlds
from benchmarks.sqlite_statements import SqliteStatements
from examples.metered_world import MeteredWorld
from workflow import Worker, get_step_metadata, start, step, workflow
from worlds.errors import WorldUnavailableError
from worlds.protocol import World
from worlds.types import CommitRequest, CommitResult

pytestmark = pytest.mark.anyio

RUNS = 24

GATE: list[anyio.Event] = []


@step
async def waits(path: str, i: int) -> int:
    with open(path, "a") as out:
        out.write(f"{get_step_metadata().step_id}\n")
    await GATE[0].wait()
    return i


@workflow
async def waiting_flow(path: str, i: int) -> int:
    return await waits(path, i) * 2


class Batches(MeteredWorld):
    """Records the size of every batch; the first ``fail`` batches raise ``error``."""

    def __init__(self, inner: World, fail: int = 0, error: Exception | None = None) -> None:
        super().__init__(inner)
        self.sizes: list[int] = []
        self.fail = fail
        self.error = error

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        self.sizes.append(len(requests))
        if self.fail and self.error is not None:
            self.fail -= 1
            raise self.error
        return await super().commit_many(requests)


async def _run_gated(world: Batches, path: Path) -> None:
    """Start ``RUNS`` runs, let every step reach the gate, open it, check results."""
    GATE[:] = [anyio.Event()]
    async with Worker(world, [waiting_flow], lease_seconds=10.0):
        runs = [await start(waiting_flow, str(path), i, world=world) for i in range(RUNS)]
        with anyio.fail_after(30):
            while not path.exists() or len(path.read_text().splitlines()) < RUNS:
                await anyio.sleep(0.01)
        GATE[0].set()  # every step finishes in the same loop turn
        for i, run in enumerate(runs):
            assert await run.result(timeout=30) == 2 * i
    lines = path.read_text().splitlines()
    assert len(lines) == len(set(lines)) == RUNS, "a step ran twice"


async def test_commits_ready_in_one_turn_go_as_one_batch(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    async with Batches(make_world()) as world:
        await _run_gated(world, tmp_path / "journal")
    assert max(world.sizes) > 1, f"no batch of more than one commit: {world.sizes}"


async def test_an_unavailable_world_fails_the_batch_and_every_caller_retries(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    error = WorldUnavailableError("the database restarts")
    async with Batches(make_world(), fail=2, error=error) as world:
        await _run_gated(world, tmp_path / "journal")
    assert world.fail == 0, "the failing batches were not tried"


async def test_a_batch_that_fails_otherwise_is_retried_request_by_request(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    error = RuntimeError("one request in this batch is bad")
    async with Batches(make_world(), fail=1000, error=error) as world:
        await _run_gated(world, tmp_path / "journal")
    assert world.sizes and max(world.sizes) > 1
    assert world.calls["commit"] >= sum(world.sizes), "the batch's requests went alone"


async def test_on_sqlite_the_commits_of_one_turn_share_a_transaction_without_commit_many(
    tmp_path: Path,
) -> None:
    """SQLite gathers the writes of a loop turn into one transaction itself
    (``gathers_writes``), so the worker sends it each commit at once rather than
    gathering them a second time: the steps finishing together still commit together."""
    path = tmp_path / "journal"
    GATE[:] = [anyio.Event()]
    with SqliteStatements(by_text=True) as traced:
        world = worlds.open(f"sqlite:///{tmp_path / 'world.db'}?poll=30")
        assert world.gathers_writes
        async with world, Worker(world, [waiting_flow], lease_seconds=10.0):
            runs = [await start(waiting_flow, str(path), i, world=world) for i in range(RUNS)]
            with anyio.fail_after(30):
                while not path.exists() or len(path.read_text().splitlines()) < RUNS:
                    await anyio.sleep(0.01)
            traced.texts.clear()
            GATE[0].set()  # every step finishes in the same loop turn
            for i, run in enumerate(runs):
                assert await run.result(timeout=30) == 2 * i
    # one transaction per step would be RUNS commits; a heartbeat may add one
    assert traced.texts.get("COMMIT", 0) <= RUNS // 4, traced.texts
