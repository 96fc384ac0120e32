"""A third-party world in one file: any world, with a count and timing of its writes and leases.

Wrapping a world is subclassing ``worlds.wrapper.WorldWrapper`` (it forwards every
method of ``worlds.World``) and overriding what changes; the conformance kit proves
it (``tests/worlds/test_example_world.py``). Register it for ``worlds.open`` through
the ``workflow.worlds`` entry-point group::

    # pyproject.toml of the package that ships it
    [project.entry-points."workflow.worlds"]
    metered = "metered_world:open_metered"

    world = worlds.open("metered+sqlite:///app.db")   # the metered SQLite world

``python examples/metered_world.py`` shows the counts for a few runs.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager

import anyio

import worlds
from worlds import World
from worlds.types import (
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookDelivery,
    HookStartResult,
    RunRecord,
    WorkItem,
)
from worlds.wrapper import WorldWrapper


class MeteredWorld(WorldWrapper):
    """Delegates to ``inner``; ``calls`` and ``seconds`` say what it was asked."""

    def __init__(self, inner: World, url: str | None = None) -> None:
        super().__init__(inner, url or f"metered+{inner.url}")
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @contextmanager
    def _timed(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.calls[name] += 1
            self.seconds[name] += time.perf_counter() - began

    async def info(self) -> dict[str, str | int]:
        return {**await super().info(), **{f"calls.{n}": c for n, c in self.calls.items()}}

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        with self._timed("create_run"):
            return await super().create_run(request)

    async def commit(self, request: CommitRequest) -> CommitResult:
        with self._timed("commit"):
            return await super().commit(request)

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        with self._timed("commit_many"):
            return await super().commit_many(requests)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        with self._timed("cancel_run"):
            return await super().cancel_run(run_id, reason)

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        with self._timed("request_cancel"):
            return await super().request_cancel(run_id, reason, grace_seconds)

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        with self._timed("resume_hook"):
            return await super().resume_hook(token, payload, resume_id)

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        with self._timed("start_or_resume_hook"):
            return await super().start_or_resume_hook(request, delivery)

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        with self._timed("append_stream"):
            return await super().append_stream(run_id, name, chunks)

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        with self._timed("lease"):
            return await super().lease(
                worker_id, names=names, limit=limit, lease_seconds=lease_seconds
            )

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        with self._timed("read_events"):
            return await super().read_events(run_id, after_seq)


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
    anyio.run(main)
