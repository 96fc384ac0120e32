"""A third-party world in one file: any world, plus a count and timing of every call.

It shows what implementing ``worlds.World`` takes — a class with the protocol's
methods, no base class — and how a third party proves it with the conformance
kit (``tests/worlds/test_example_world.py``). Register it for ``worlds.open`` through
the ``workflow.worlds`` entry-point group::

    # pyproject.toml of the package that ships it
    [project.entry-points."workflow.worlds"]
    metered = "metered_world:open_metered"

    world = worlds.open("metered+sqlite:///app.db")   # the metered SQLite world

Run ``python examples/metered_world.py`` to see the counts for a few runs.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import Self

import worlds
from worlds import PROTOCOL_VERSION, World
from worlds.types import (
    AttributeValue,
    Claim,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookDelivery,
    HookRecord,
    HookStartResult,
    RunPage,
    RunQuery,
    RunRecord,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    StreamChunk,
    WorkItem,
)


class MeteredWorld:
    """Delegates to ``inner``; ``calls`` and ``seconds`` say what it was asked."""

    protocol_version = PROTOCOL_VERSION

    def __init__(self, inner: World, url: str | None = None) -> None:
        self.inner = inner
        self.url = url or f"metered+{inner.url}"
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def _timed(self, name: str, began: float) -> None:
        self.calls[name] += 1
        self.seconds[name] += time.perf_counter() - began

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
        await self.inner.close()

    async def migrate(self) -> int:
        return await self.inner.migrate()

    def now(self) -> datetime:
        return self.inner.now()

    async def info(self) -> dict[str, str | int]:
        facts = await self.inner.info()
        return {**facts, **{f"calls.{name}": count for name, count in self.calls.items()}}

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        began = time.perf_counter()
        try:
            return await self.inner.create_run(request)
        finally:
            self._timed("create_run", began)

    async def commit(self, request: CommitRequest) -> CommitResult:
        began = time.perf_counter()
        try:
            return await self.inner.commit(request)
        finally:
            self._timed("commit", began)

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        began = time.perf_counter()
        try:
            return await self.inner.commit_many(requests)
        finally:
            self._timed("commit_many", began)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        began = time.perf_counter()
        try:
            return await self.inner.cancel_run(run_id, reason)
        finally:
            self._timed("cancel_run", began)

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        began = time.perf_counter()
        try:
            return await self.inner.request_cancel(run_id, reason, grace_seconds)
        finally:
            self._timed("request_cancel", began)

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        began = time.perf_counter()
        try:
            return await self.inner.resume_hook(token, payload, resume_id)
        finally:
            self._timed("resume_hook", began)

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        began = time.perf_counter()
        try:
            return await self.inner.start_or_resume_hook(request, delivery)
        finally:
            self._timed("start_or_resume_hook", began)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        return await self.inner.list_hooks(run_id)

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        return await self.inner.reopen_run(run_id, by)

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        return await self.inner.fork_run(source_run_id, run_id, from_step, by)

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        began = time.perf_counter()
        try:
            return await self.inner.append_stream(run_id, name, chunks)
        finally:
            self._timed("append_stream", began)

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        return await self.inner.read_stream(run_id, name, start, limit)

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        began = time.perf_counter()
        try:
            return await self.inner.lease(
                worker_id, names=names, limit=limit, lease_seconds=lease_seconds
            )
        finally:
            self._timed("lease", began)

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        return await self.inner.renew_leases(worker_id, items, lease_seconds)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        await self.inner.release(worker_id, items)

    async def wait(self, topic: str, timeout: float) -> None:
        await self.inner.wait(topic, timeout)

    async def get_run(self, run_id: str) -> RunRecord | None:
        return await self.inner.get_run(run_id)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        began = time.perf_counter()
        try:
            return await self.inner.read_events(run_id, after_seq)
        finally:
            self._timed("read_events", began)

    async def list_runs(self, query: RunQuery) -> RunPage:
        return await self.inner.list_runs(query)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        return await self.inner.find_claim(key, value)

    async def run_claims(self, run_id: str) -> list[Claim]:
        return await self.inner.run_claims(run_id)

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        return await self.inner.list_slots(key, value)

    async def run_slots(self, run_id: str) -> list[Slot]:
        return await self.inner.run_slots(run_id)

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        return await self.inner.prune_runs(closed_before, limit, release_claims=release_claims)

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        return await self.inner.create_schedule(record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        return await self.inner.get_schedule(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        return await self.inner.list_schedules(after=after, limit=limit)

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        return await self.inner.update_schedule(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        return await self.inner.delete_schedule(schedule_id)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        began = time.perf_counter()
        try:
            return await self.inner.lease_schedules(
                worker_id, names=names, limit=limit, lease_seconds=lease_seconds
            )
        finally:
            self._timed("lease_schedules", began)


def open_metered(url: str) -> MeteredWorld:
    """The entry-point factory: ``metered+sqlite:///app.db`` meters the SQLite world."""
    _, _, inner_url = url.partition("+")
    return MeteredWorld(worlds.open(inner_url), url)


async def main() -> None:
    from workflow import Worker, start, step, workflow

    @step
    async def double(x: int) -> int:
        return 2 * x

    @workflow
    async def twice(x: int) -> int:
        return await double(await double(x))

    world = MeteredWorld(worlds.open("memory://"))
    async with world, Worker(world, [twice, double]):
        for x in range(10):
            assert await (await start(twice, x, world=world)).result(timeout=10) == 4 * x
    for name, count in world.calls.most_common():
        print(f"{name:<15} {count:>4} calls  {1e6 * world.seconds[name] / count:8.1f} µs each")


if __name__ == "__main__":
    import anyio

    anyio.run(main)
