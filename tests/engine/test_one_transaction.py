"""One transaction per step: a worker holding a run's workflow in memory commits a
step's outcome together with the workflow's next commands, reads back nothing it
wrote, and falls back to the ordinary two commits when the log moved meanwhile.

A crash between a step's body and that combined commit re-runs only that step.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import pytest

from examples.metered_world import MeteredWorld
from workflow import (
    Worker,
    create_hook,
    get_step_metadata,
    resume_hook,
    start,
    step,
    workflow,
)
from worlds.errors import WorldUnavailableError
from worlds.protocol import World
from worlds.types import (
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookReceived,
    RunCompleted,
    StepCompleted,
    StepCreated,
    WorkItem,
)

pytestmark = pytest.mark.anyio


def journal(path: str, line: str) -> None:
    with open(path, "a") as out:
        out.write(line + "\n")


def starts(path: Path) -> list[tuple[int, int]]:
    """``(argument, attempt)`` of every step body that began, in order."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(i), int(a)) for _, i, a in (line.split() for line in lines)]


class Dying(MeteredWorld):
    """A worker's view of the world that ends, as a killed process's would: once
    ``dead``, every call the worker makes fails (the storage is untouched)."""

    dead = False

    def _check(self) -> None:
        if self.dead:
            raise WorldUnavailableError("the worker's process is gone")

    async def commit(self, request: CommitRequest) -> CommitResult:
        self._check()
        return await super().commit(request)

    async def lease(self, worker_id: str, **options: object) -> list[WorkItem]:  # type: ignore[override]
        self._check()
        return await super().lease(worker_id, **options)  # type: ignore[arg-type]

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        self._check()
        return await super().renew_leases(worker_id, items, lease_seconds)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        self._check()
        await super().release(worker_id, items)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        self._check()
        return await super().read_events(run_id, after_seq)


class Counting(MeteredWorld):
    """Counts commit requests, whether sent alone or in a batch."""

    requests = 0
    largest_batch = 0
    first_tasks = 0

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        created = await super().create_run(request)
        self.first_tasks += created.first is not None
        return created

    async def commit(self, request: CommitRequest) -> CommitResult:
        self.requests += 1
        return await super().commit(request)

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        self.requests += len(requests)
        self.largest_batch = max(self.largest_batch, len(requests))
        return await super().commit_many(requests)


DYING: list[Dying] = []


@step(retry_delay=0.0)
async def noted(path: str, i: int, die_at: int) -> int:
    journal(path, f"start {i} {get_step_metadata().attempt}")
    if i == die_at and DYING:
        DYING[0].dead = True  # the body is done; its worker dies before committing
    return i


@workflow
async def noted_flow(path: str, n: int, die_at: int) -> int:
    total = 0
    for i in range(n):
        total += await noted(path, i, die_at)
    return total


@step
async def gated(path: str, gate: str) -> str:
    journal(path, "start 0 1")
    while not Path(gate).exists():
        await anyio.sleep(0.02)
    return "stepped"


@workflow
async def hooked_flow(path: str, gate: str, token: str) -> list[str]:
    hook = create_hook(token)
    stepped = await gated(path, gate)
    return [stepped, await hook]


async def test_each_step_is_one_commit_and_nothing_is_read_back(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    """A run of n steps costs n + 1 commits (the first workflow task, then one per
    step) and no read of its log, on every world: each takes the first task with
    the run's creation, and then reads nothing."""
    path = tmp_path / "journal"
    async with Counting(make_world()) as world, Worker(world, [noted_flow]):
        runs = [await start(noted_flow, str(path), 5, -1, world=world) for _ in range(3)]
        for run in runs:
            assert await run.result(timeout=30) == 10
        # a world that takes a run's first task with its start saves that commit too
        assert world.requests + world.first_tasks == 3 * (5 + 1)
        assert world.calls["read_events"] == 3 - world.first_tasks
        assert world.first_tasks == 3
        log = await runs[0].events()
    # each step's outcome shares its transaction (and time) with the next command
    outcomes = [e for e in log if isinstance(e, StepCompleted)]
    following = [log[e.seq] for e in outcomes]  # the event right after each outcome
    assert [type(e) for e in following] == [StepCreated] * 4 + [RunCompleted]
    assert all(a.at == b.at for a, b in zip(outcomes, following, strict=True))


async def test_a_crash_between_a_step_and_its_commit_reruns_only_that_step(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    """The worker dies after step 2's body returned, before its combined commit: a
    second worker re-runs step 2 (attempt 2) and nothing else."""
    path = tmp_path / "journal"
    async with make_world() as world:
        dying = Dying(world)
        DYING[:] = [dying]
        try:
            async with Worker(dying, [noted_flow], lease_seconds=1.0, shutdown_grace=0.1):
                run = await start(noted_flow, str(path), 4, 2, world=world)
                with anyio.fail_after(30):
                    while not dying.dead:
                        await anyio.sleep(0.01)
        finally:
            DYING.clear()
        async with Worker(world, [noted_flow], lease_seconds=1.0):
            assert await run.result(timeout=30) == 0 + 1 + 2 + 3
    assert starts(path) == [(0, 1), (1, 1), (2, 1), (2, 2), (3, 1)]


async def test_an_event_during_a_step_makes_the_worker_commit_the_ordinary_way(
    make_world: Callable[[], World], tmp_path: Path
) -> None:
    """A hook resumed while the step runs lands in the log before the step's
    outcome, which the cached workflow has not seen: the combined commit is
    refused and the run goes on by replay, with the same answer."""
    path, gate = tmp_path / "journal", tmp_path / "gate"
    token = f"tok-{uuid.uuid4().hex}"
    async with make_world() as world, Worker(world, [hooked_flow]):
        run = await start(hooked_flow, str(path), str(gate), token, world=world)
        with anyio.fail_after(30):
            while not starts(path):
                await anyio.sleep(0.01)
        assert (await resume_hook(token, "hi", world=world)).id == run.id
        gate.touch()
        assert await run.result(timeout=30) == ["stepped", "hi"]
        log = await run.events()
    kinds = [type(e) for e in log]
    assert kinds.index(HookReceived) < kinds.index(StepCompleted)
    assert starts(path) == [(0, 1)]
