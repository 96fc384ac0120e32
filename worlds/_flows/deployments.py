"""Pinned deployments' flows: a build's workflows recorded, the builds a lease
honours, the builds leased runs record, and the deployments listed (RFC 0025).

The rules are ``worlds._rules.deployments``. ``register`` runs inside the
registration's transaction (``worlds._flows.liveness.register``); ``build_rights``
inside the lease's, with the workers it read for liveness; ``record_builds``
after the items are leased, in the same transaction. The PostgreSQL world's
lease writes the filter and the recording in its one statement (``LEASE`` in
``worlds/postgres/statements.py``), the SQLite world its filter in its scans
(``due_work_sql``): the same rule in SQL, held equal by the conformance kit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

from worlds._flows.rows import Beat, WorkerRows
from worlds._rules import deployments
from worlds.types import DeploymentRecord, Pin, WorkerInfo

__all__ = [
    "BuildRights",
    "Deployed",
    "OpenRuns",
    "build_rights",
    "listing",
    "record_builds",
    "register",
    "rights_among",
]


async def register(rows: WorkerRows, info: WorkerInfo) -> None:
    """Record the workflows of ``info``'s build, refusing names that differ from those
    recorded for it (``deployments.check_workflows``). A worker without a build id
    records nothing."""
    if info.build_id is None:
        return
    if not info.build_id or len(info.build_id) > 128:
        raise ValueError(f"a build id is 1-128 characters, not {info.build_id!r}")
    recorded = await rows.deployment(info.build_id)
    deployments.check_workflows(info.build_id, recorded, info.workflows)
    if recorded != info.workflows:
        await rows.put_deployment(info.build_id, info.workflows)


class BuildRights:
    """Which runs a leaser's build may lease, and what leased runs record."""

    def __init__(self, build: str | None, top: str | None, recorded: Mapping[str, Pin] | None):
        self.build = build
        """The leaser's build (``None``: it has none)."""
        self.top = top
        """The newest build (``deployments.newest``)."""
        self._recorded = recorded

    def may_run(self, run_build: str | None, run_pin: Pin | None) -> bool:
        """Whether the leaser may lease an item of a run that recorded these."""
        return deployments.may_lease(run_build, run_pin, self.build, self.top)

    def records(
        self, workflow: str, run_build: str | None, run_pin: Pin | None
    ) -> tuple[str, Pin] | None:
        """What such a run records once leased here (``None``: nothing changes)."""
        return deployments.records(workflow, run_build, run_pin, self.build, self._recorded)


async def build_rights(
    rows: WorkerRows, leaser: Beat | None, everyone: Iterable[Beat]
) -> BuildRights:
    """The build rights of ``leaser`` (its row, ``None``: not registered) among
    ``everyone`` (every registered worker's row)."""
    build = None if leaser is None else leaser.info.build_id
    recorded = None if build is None else await rows.deployment(build)
    return BuildRights(build, deployments.newest(everyone), recorded)


def rights_among(worker_id: str, everyone: Sequence[Beat]) -> BuildRights:
    """The build rights of ``worker_id`` among ``everyone``, for a scan that only
    filters (its ``records`` takes every workflow's pin as ``run``)."""
    build = next((w.info.build_id for w in everyone if w.info.id == worker_id), None)
    return BuildRights(build, deployments.newest(everyone), None)


async def record_builds(rows: WorkerRows, rights: BuildRights, run_ids: Collection[str]) -> None:
    """Record the leaser's build on those of ``run_ids`` (runs whose workflow items it
    just leased: a task, not a step) that take it: their first task, or a ``latest``
    run moving to it."""
    if rights.build is None or not run_ids:
        return
    for run in await rows.run_builds(run_ids):
        change = rights.records(run.workflow, run.build_id, run.pin)
        if change is not None:
            await rows.set_run_build(run.run_id, *change)


class Deployed(NamedTuple):
    """A build's recorded workflows, as a backend reads them."""

    build_id: str
    workflows: dict[str, Pin]
    registered_at: datetime


class OpenRuns(NamedTuple):
    """How many open runs recorded a build with a pin, as a backend counts them."""

    build_id: str
    pin: Pin | None
    runs: int


def listing(
    builds: Sequence[Deployed], workers: Sequence[Beat], open_runs: Sequence[OpenRuns]
) -> list[DeploymentRecord]:
    """Every recorded build with its open runs and live workers (``World.list_deployments``),
    newest registration first."""
    top = deployments.newest(workers)
    listed = []
    for build in sorted(builds, key=lambda b: (b.registered_at, b.build_id), reverse=True):
        mine = [group for group in open_runs if group.build_id == build.build_id]
        serving = [
            worker
            for worker in workers
            if worker.info.build_id == build.build_id and deployments.live(worker, workers)
        ]
        listed.append(
            DeploymentRecord(
                build_id=build.build_id,
                workflows=tuple(sorted(build.workflows)),
                registered_at=build.registered_at,
                open_runs=sum(group.runs for group in mine),
                pinned_runs=sum(
                    group.runs
                    for group in mine
                    if deployments.needs(group.pin, build.build_id, top)
                ),
                live_workers=len(serving),
                newest=build.build_id == top,
            )
        )
    return listed
