"""Conformance: pinned deployments (RFC 0025): a run records the build of its first
task and stays on it, new runs go to the newest build, a ``pin="latest"`` run moves
to it, nothing is leased across builds, and a build's workflow names are recorded
and a worker with other names under that build id refused.

The workers register with ``register_worker`` (no heartbeats: every test runs well
inside one liveness window, so each registered worker stays live) and lease with
``lease`` directly, as a worker's loop would.
"""

from __future__ import annotations

import os
import socket

import pytest

from worlds.protocol import World
from worlds.testing._base import WF, ConformanceBase, create_run, new_run_id
from worlds.types import (
    CommitRequest,
    DeploymentRecord,
    Pin,
    RunCompleted,
    RunStarted,
    WorkerInfo,
    WorkItem,
)

__all__ = ["DeploymentConformance"]

WINDOW = 600.0
"""The kit's workers' liveness window: none of them is declared dead in a test."""


async def _register(world: World, build: str | None, pin: Pin = "run", *names: str) -> str:
    """Register a new worker of ``build`` serving ``WF`` (and ``names``) with ``pin``;
    its id."""
    worker_id = f"deploy-{build}-{new_run_id()}"
    workflows: dict[str, Pin] = {name: pin for name in (WF, *names)} if build else {}
    info = WorkerInfo(
        id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        build_id=build,
        liveness_seconds=WINDOW,
        workflows=workflows,
    )
    await world.register_worker(info)
    return worker_id


async def _lease(world: World, worker_id: str, run_id: str) -> WorkItem | None:
    """``run_id``'s workflow item if ``worker_id`` may lease it now."""
    items = await world.lease(worker_id, names={WF}, limit=100, lease_seconds=30.0)
    mine = [item for item in items if item.run_id == run_id]
    others = [item for item in items if item.run_id != run_id]
    if others:
        await world.release(worker_id, others)
    return mine[0] if mine else None


async def _recorded(world: World, run_id: str) -> tuple[str | None, str | None]:
    run = await world.get_run(run_id)
    assert run is not None
    return run.build_id, run.pin


async def _deployments(world: World) -> dict[str, DeploymentRecord]:
    return {record.build_id: record for record in await world.list_deployments()}


def _build(tag: str) -> str:
    return f"{tag}-{new_run_id()[:8]}"


class DeploymentConformance(ConformanceBase):
    """Build ids pin runs to the code that started them (``worlds._rules.deployments``)."""

    @pytest.mark.anyio
    async def test_a_run_records_its_first_tasks_build_and_stays_on_it(self, world: World) -> None:
        """The first workflow task's worker gives the run its build; afterwards only
        workers of that build lease its items: not a newer build's, not one without
        a build, whatever is newest."""
        v1, v2 = _build("v1"), _build("v2")
        old = await _register(world, v1)
        run = await create_run(world)
        assert await _recorded(world, run.id) == (None, None), "no task ran yet"
        item = await _lease(world, old, run.id)
        assert item is not None, "the only build's worker could not lease a new run"
        assert await _recorded(world, run.id) == (v1, "run")
        await world.release(old, [item])
        new, plain = await _register(world, v2), await _register(world, None)
        assert await _lease(world, new, run.id) is None, "a newer build leased a pinned run"
        assert await _lease(world, plain, run.id) is None, "a build-less worker leased it"
        again = await _lease(world, old, run.id)
        assert again is not None, "the run's own build could not lease it any more"
        assert await _recorded(world, run.id) == (v1, "run")

    @pytest.mark.anyio
    async def test_new_runs_go_to_the_newest_build(self, world: World) -> None:
        """Once a newer build's worker registered, a new run's first task goes to it:
        the older build's workers, still serving their pinned runs, take no new run.
        The newest is the most recent registration: a worker of the old build that
        registers again makes it the newest (a rollback)."""
        v1, v2 = _build("v1"), _build("v2")
        old = await _register(world, v1)
        new = await _register(world, v2)
        run = await create_run(world)
        assert await _lease(world, old, run.id) is None, "an older build took a new run"
        item = await _lease(world, new, run.id)
        assert item is not None
        assert await _recorded(world, run.id) == (v2, "run")
        listed = await _deployments(world)
        assert listed[v2].newest and not listed[v1].newest
        await world.unregister_worker(new)
        back = await _register(world, v1)
        later = await create_run(world)
        assert await _lease(world, back, later.id) is not None, "rolled back: v1 is newest"
        assert await _recorded(world, later.id) == (v1, "run")
        assert (await _deployments(world))[v1].newest

    @pytest.mark.anyio
    async def test_a_latest_run_moves_to_the_newest_build_at_its_next_task(
        self, world: World
    ) -> None:
        """A ``pin="latest"`` run records its first build, and its next task goes to
        the newest build (which it then records); the old build no longer leases it."""
        v1, v2 = _build("v1"), _build("v2")
        old = await _register(world, v1, "latest")
        run = await create_run(world)
        item = await _lease(world, old, run.id)
        assert item is not None
        assert await _recorded(world, run.id) == (v1, "latest")
        await world.release(old, [item])
        new = await _register(world, v2, "latest")
        assert await _lease(world, old, run.id) is None, "a latest run stayed on the old build"
        moved = await _lease(world, new, run.id)
        assert moved is not None, "the newest build could not take a latest run"
        assert await _recorded(world, run.id) == (v2, "latest")

    @pytest.mark.anyio
    async def test_a_run_whose_build_has_no_worker_waits_for_one(self, world: World) -> None:
        """A pinned run whose build's workers all stopped is leased by nobody else;
        ``list_deployments`` shows the build with its open run and no live worker,
        until the run closes."""
        v1, v2 = _build("v1"), _build("v2")
        old = await _register(world, v1)
        run = await create_run(world)
        item = await _lease(world, old, run.id)
        assert item is not None
        await world.release(old, [item])
        await world.unregister_worker(old)
        new, plain = await _register(world, v2), await _register(world, None)
        assert await _lease(world, new, run.id) is None
        assert await _lease(world, plain, run.id) is None
        listed = await _deployments(world)
        assert (listed[v1].open_runs, listed[v1].pinned_runs, listed[v1].live_workers) == (
            1,
            1,
            0,
        )
        assert (listed[v2].open_runs, listed[v2].live_workers, listed[v2].newest) == (0, 1, True)
        back = await _register(world, v1)
        final = await _lease(world, back, run.id)
        assert final is not None, "a worker of the run's build came back and could not lease"
        done = await world.commit(
            CommitRequest(
                run_id=run.id,
                worker_id=back,
                lease=final,
                events=(RunStarted(), RunCompleted(result=b"")),
            )
        )
        assert done.ok, f"{done!r}"
        listed = await _deployments(world)
        assert (listed[v1].open_runs, listed[v1].pinned_runs) == (0, 0), "v1 is drained"

    @pytest.mark.anyio
    async def test_a_build_records_its_workflow_names_and_refuses_other_ones(
        self, world: World
    ) -> None:
        """The first worker of a build records its workflows' names; another worker
        under that build id with other names (another codebase) is refused, and
        nothing of it is written; one with the same names registers."""
        v1 = _build("v1")
        await _register(world, v1, "run", "other-wf")
        before = {worker.id for worker in await world.list_workers()}
        with pytest.raises(ValueError, match="other workflows"):
            await _register(world, v1, "run")
        with pytest.raises(ValueError, match="other workflows"):
            await _register(world, v1, "run", "other-wf", "third-wf")
        assert {worker.id for worker in await world.list_workers()} == before
        twin = await _register(world, v1, "run", "other-wf")
        assert twin in {worker.id for worker in await world.list_workers()}
        listed = await _deployments(world)
        assert listed[v1].workflows == tuple(sorted((WF, "other-wf")))
        assert listed[v1].live_workers == 2

    @pytest.mark.anyio
    async def test_without_build_ids_every_worker_leases_every_run(self, world: World) -> None:
        """A world where no worker has a build id leases as before: any worker takes
        any run, and no run records a build."""
        first, second = await _register(world, None), await _register(world, None)
        run = await create_run(world)
        item = await _lease(world, first, run.id)
        assert item is not None
        await world.release(first, [item])
        assert await _lease(world, second, run.id) is not None
        assert await _recorded(world, run.id) == (None, None)
        assert await world.list_deployments() == []
