"""``WorldWrapper``: a world that forwards every method of ``World`` to another.

A world that adds something to another (payload codecs, metering, tracing)
subclasses it and overrides only the methods it changes::

    class CountingWorld(WorldWrapper):
        async def commit(self, request: CommitRequest) -> CommitResult:
            self.commits += 1
            return await super().commit(request)

Every protocol method is defined here, so none reaches the inner world by
accident: ``tests/worlds/test_wrappers.py`` fails when ``World`` gains a
method this class does not define. What a backend offers beyond the protocol
(``path``, ``next_due``, ...) is reached through ``__getattr__``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from worlds.archive import DumpRow
from worlds.protocol import PROTOCOL_VERSION, Isolation, OpenTransaction, World
from worlds.query import CountField, RunCount, RunPage, RunQuery
from worlds.types import (
    SLOT_HISTORY_KEEP,
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    DeploymentRecord,
    EventKind,
    HookDelivery,
    HookRecord,
    HookStartResult,
    KeyLimit,
    ListedReopen,
    RunRecord,
    RunStatus,
    ScheduleFire,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    SlotSample,
    StreamChunk,
    UpdateDelivery,
    UpdateOutcome,
    UpdateStartResult,
    WorkerInfo,
    WorkerRecord,
    WorkItem,
)

__all__ = ["WorldWrapper"]


class WorldWrapper:
    """Forwards every ``World`` method to ``inner``; subclasses change some.

    Args:
        inner: the wrapped world.
        url: this world's URL (default: the inner world's).
    """

    protocol_version = PROTOCOL_VERSION
    gathers_writes = False
    """Not the inner world's (SQLite's writes of one loop turn share a transaction):
    a wrapper may do more per ``commit`` than forward it, so a worker gathers the
    commits for its ``commit_many`` as for any world."""

    def __init__(self, inner: World, url: str | None = None) -> None:
        self.inner = inner
        self.url = inner.url if url is None else url

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def __getattr__(self, name: str) -> object:
        # only what the protocol does not define: every protocol method is below
        if name == "inner":  # not set yet (during unpickling, say): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ Lifecycle

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc, tb)

    async def close(self) -> None:
        """See ``World.close``."""
        await self.inner.close()

    async def migrate(self) -> int:
        """See ``World.migrate``."""
        return await self.inner.migrate()

    async def info(self) -> dict[str, str | int]:
        """See ``World.info``."""
        return await self.inner.info()

    async def setting(self, key: str, value: str | None = None) -> str | None:
        """See ``World.setting``."""
        return await self.inner.setting(key, value)

    async def put_setting(self, key: str, value: str | None) -> None:
        """See ``World.put_setting``."""
        await self.inner.put_setting(key, value)

    # ------------------------------------------------------------------ Runs

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run``."""
        return await self.inner.create_run(request)

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        return await self.inner.commit(request)

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        """See ``World.commit_many``."""
        return await self.inner.commit_many(requests)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run``."""
        return await self.inner.cancel_run(run_id, reason)

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        return await self.inner.request_cancel(run_id, reason, grace_seconds)

    async def cancel_listed(
        self, run_ids: Sequence[str], reason: str | None, grace_seconds: float | None
    ) -> dict[str, RunStatus | None]:
        """See ``World.cancel_listed``."""
        return await self.inner.cancel_listed(run_ids, reason, grace_seconds)

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        """See ``World.reopen_run``."""
        return await self.inner.reopen_run(run_id, by)

    async def reopen_listed(
        self, run_ids: Sequence[str], by: str
    ) -> dict[str, ListedReopen | None]:
        """See ``World.reopen_listed``."""
        return await self.inner.reopen_listed(run_ids, by)

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        """See ``World.fork_run``."""
        return await self.inner.fork_run(source_run_id, run_id, from_step, by)

    async def move_start(self, run_id: str, delay: float | None) -> RunRecord | None:
        """See ``World.move_start``."""
        return await self.inner.move_start(run_id, delay)

    async def set_key_limit(
        self, key: str, limit: int | None, weights: Mapping[Any, float] | None = None
    ) -> KeyLimit | None:
        """See ``World.set_key_limit``."""
        return await self.inner.set_key_limit(key, limit, weights)

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``World.get_run``."""
        return await self.inner.get_run(run_id)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``."""
        return await self.inner.read_events(run_id, after_seq)

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_runs``."""
        return await self.inner.prune_runs(closed_before, limit, release_claims=release_claims)

    async def prune_expired(
        self, keep: Mapping[RunStatus, float], limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_expired``."""
        return await self.inner.prune_expired(keep, limit, release_claims=release_claims)

    async def prune_listed(
        self, run_ids: Sequence[str], *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_listed``."""
        return await self.inner.prune_listed(run_ids, release_claims=release_claims)

    async def prune_slot_history(self, keep: float = SLOT_HISTORY_KEEP, limit: int = 1000) -> int:
        """See ``World.prune_slot_history``."""
        return await self.inner.prune_slot_history(keep, limit)

    async def pin_run(self, run_id: str, pinned: bool) -> RunRecord | None:
        """See ``World.pin_run``."""
        return await self.inner.pin_run(run_id, pinned)

    async def release_claim(self, key: str, value: AttributeValue) -> Claim | ClaimConflict | None:
        """See ``World.release_claim``."""
        return await self.inner.release_claim(key, value)

    # ------------------------------------------------------------------ Work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``."""
        return await self.inner.lease(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        return await self.inner.renew_leases(worker_id, items, lease_seconds)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        await self.inner.release(worker_id, items)

    def now(self) -> datetime:
        """See ``World.now``."""
        return self.inner.now()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``."""
        await self.inner.wait(topic, timeout)

    async def wait_idle(self, topic: str, names: Collection[str], timeout: float) -> None:
        """See ``World.wait_idle`` (``wait`` when the inner world predates it)."""
        wait_idle = getattr(self.inner, "wait_idle", None)
        if wait_idle is None:
            await self.inner.wait(topic, timeout)
            return
        await wait_idle(topic, names, timeout)

    # ------------------------------------------------------------------ Liveness

    async def register_worker(self, worker: WorkerInfo) -> WorkerRecord:
        """See ``World.register_worker``."""
        return await self.inner.register_worker(worker)

    async def heartbeat(self, worker_id: str, in_flight: int) -> bool:
        """See ``World.heartbeat``."""
        return await self.inner.heartbeat(worker_id, in_flight)

    async def unregister_worker(self, worker_id: str) -> None:
        """See ``World.unregister_worker``."""
        await self.inner.unregister_worker(worker_id)

    async def list_workers(self) -> list[WorkerRecord]:
        """See ``World.list_workers``."""
        return await self.inner.list_workers()

    async def list_deployments(self) -> list[DeploymentRecord]:
        """See ``World.list_deployments``."""
        return await self.inner.list_deployments()

    # ------------------------------------------------------------------ Hooks

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``."""
        return await self.inner.resume_hook(token, payload, resume_id)

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """See ``World.start_or_resume_hook``."""
        return await self.inner.start_or_resume_hook(request, delivery)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        return await self.inner.list_hooks(run_id)

    # ------------------------------------------------------------------ Updates

    async def send_update(self, run_id: str, delivery: UpdateDelivery) -> UpdateOutcome:
        """See ``World.send_update``."""
        return await self.inner.send_update(run_id, delivery)

    async def update_outcome(self, run_id: str, update_id: str) -> UpdateOutcome | None:
        """See ``World.update_outcome``."""
        return await self.inner.update_outcome(run_id, update_id)

    async def update_with_start(
        self, request: CreateRunRequest, delivery: UpdateDelivery
    ) -> UpdateStartResult:
        """See ``World.update_with_start``."""
        return await self.inner.update_with_start(request, delivery)

    # ------------------------------------------------------------------ Streams

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``."""
        return await self.inner.append_stream(run_id, name, chunks)

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """See ``World.read_stream``."""
        return await self.inner.read_stream(run_id, name, start, limit)

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """See ``World.stream_closed``."""
        return await self.inner.stream_closed(run_id, name)

    # ------------------------------------------------------------------ Index

    def export_rows(self, run_ids: Sequence[str] | None = None) -> AsyncIterator[DumpRow]:
        """See ``World.export_rows``."""
        return self.inner.export_rows(run_ids)

    async def import_rows(self, rows: Sequence[DumpRow]) -> None:
        """See ``World.import_rows``."""
        await self.inner.import_rows(rows)

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``."""
        return await self.inner.list_runs(query)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        return await self.inner.find_claim(key, value)

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        return await self.inner.run_claims(run_id)

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        return await self.inner.list_slots(key, value)

    async def run_slots(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        return await self.inner.run_slots(run_id)

    async def get_key_limit(self, key: str) -> KeyLimit | None:
        """See ``World.get_key_limit``."""
        return await self.inner.get_key_limit(key)

    async def list_key_slots(self, key: str, limit: int = 1000) -> list[Slot]:
        """See ``World.list_key_slots``."""
        return await self.inner.list_key_slots(key, limit)

    async def slot_history(
        self, key: str, since: datetime, until: datetime, width: int = 60
    ) -> list[SlotSample]:
        """See ``World.slot_history``."""
        return await self.inner.slot_history(key, since, until, width)

    async def count_runs(
        self, query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
    ) -> list[RunCount]:
        """See ``World.count_runs``."""
        return await self.inner.count_runs(query, field, since, until, width)

    # ------------------------------------------------------------------ Schedules

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        return await self.inner.create_schedule(record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return await self.inner.get_schedule(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        return await self.inner.list_schedules(after=after, limit=limit)

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        return await self.inner.update_schedule(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        return await self.inner.delete_schedule(schedule_id)

    async def fire_schedules(
        self, fires: Sequence[ScheduleFire]
    ) -> list[ScheduleRecord | Exception | None]:
        """See ``World.fire_schedules``."""
        return await self.inner.fire_schedules(fires)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        return await self.inner.lease_schedules(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )

    # ------------------------------------------------------------------ Transactions

    def transaction(
        self, lease: WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AbstractAsyncContextManager[OpenTransaction]:
        """See ``World.transaction``."""
        return self.inner.transaction(lease, worker_id, isolation)
