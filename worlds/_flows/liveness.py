"""Registering, heartbeating and fencing workers: the liveness flows, once.

Each reads the workers' rows (``worlds._flows.rows.WorkerRows``), asks the rule
(``worlds._rules.liveness``) and writes its outcome, in one transaction. A
worker the rule finds dead is fenced in the transaction that finds it so: its
row marked ``fenced`` and every lease it holds revoked, so a zombie that comes
back commits nothing. The PostgreSQL world writes the heartbeat and the lease's
takeover test as one statement each (``worlds/postgres/statements.py``), the
same rule in SQL.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime

from worlds._flows import deployments
from worlds._flows.deployments import BuildRights
from worlds._flows.rows import Beat, WorkerRows
from worlds._rules import liveness
from worlds.types import WorkerInfo, WorkerRecord

__all__ = ["LeaseRights", "heartbeat", "lease_rights", "listing", "register", "unregister"]


async def register(rows: WorkerRows, info: WorkerInfo) -> WorkerRecord:
    """See ``World.register_worker``."""
    if info.liveness_seconds <= 0:
        raise ValueError(
            f"a worker's liveness window must be positive, not {info.liveness_seconds}"
        )
    existing = await rows.worker(info.id)
    if existing is not None and existing.fenced:
        raise ValueError(f"worker {info.id} was declared dead: it stays fenced")
    await deployments.register(rows, info)
    await rows.drop_workers(rows.now - liveness.RETENTION)
    worker = liveness.register(info, rows.now)
    await rows.put_worker(worker)
    return liveness.record(worker, (), rows.now)


async def heartbeat(rows: WorkerRows, worker_id: str, in_flight: int) -> bool:
    """See ``World.heartbeat``: one read of the workers (an idle worker's heartbeat is
    most of the statements it sends, RFC 0018)."""
    everyone = await rows.workers()
    worker = next((each for each in everyone if each.info.id == worker_id), None)
    if worker is None or worker.stopped or worker.fenced:
        return False
    if liveness.is_dead(worker, everyone):
        await _fence(rows, worker)
        return False
    await rows.put_worker(liveness.beat(worker, rows.now, in_flight))
    return True


async def unregister(rows: WorkerRows, worker_id: str) -> None:
    """See ``World.unregister_worker``."""
    worker = await rows.worker(worker_id)
    if worker is not None and not worker.stopped:
        await rows.put_worker(worker._replace(stopped=True))


class LeaseRights:
    """Whose items whose leases ran out a leaser may take, and (``builds``) the runs
    of which builds (``lease_rights``)."""

    def __init__(self, workers: Mapping[str, Beat], builds: BuildRights) -> None:
        self._workers = workers
        self.builds = builds

    def may_take(self, owner: str, expired_at: datetime) -> bool:
        """Whether the item ``owner`` holds, whose lease ran out at ``expired_at``, may
        be taken (``worlds._rules.liveness.may_take``)."""
        held_by = self._workers.get(owner)
        return liveness.may_take(held_by, self._workers.values(), expired_at)


async def lease_rights(
    rows: WorkerRows, worker_id: str, owners: Collection[str]
) -> LeaseRights | None:
    """What ``worker_id`` may take from ``owners`` (holders of leases that ran out);
    each of them that is dead is fenced first. ``None``: ``worker_id`` itself is
    fenced and leases nothing."""
    everyone = {worker.info.id: worker for worker in await rows.workers()}
    leaser = everyone.get(worker_id)
    if leaser is not None and leaser.fenced:
        return None
    for owner in owners:
        held_by = everyone.get(owner)
        if held_by is None or held_by.stopped or held_by.fenced:
            continue
        if liveness.is_dead(held_by, everyone.values()):
            await _fence(rows, held_by)
            everyone[owner] = held_by._replace(fenced=True)
    return LeaseRights(everyone, await deployments.build_rights(rows, leaser, everyone.values()))


def listing(workers: Sequence[Beat], now: datetime) -> list[WorkerRecord]:
    """Every worker of ``workers`` (all the registered ones) as ``list_workers``
    shows it at ``now``, by id."""
    ordered = sorted(workers, key=lambda worker: worker.info.id)
    return [liveness.record(worker, workers, now) for worker in ordered]


async def _fence(rows: WorkerRows, worker: Beat) -> None:
    """Declare ``worker`` dead: fenced, every lease it holds given back."""
    await rows.put_worker(worker._replace(fenced=True))
    await rows.revoke_leases(worker.info.id)
