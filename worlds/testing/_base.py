"""Fixtures and helpers shared by every part of the conformance kit.

Everything here talks to a world through the ``World`` protocol only, so the
kit holds for any backend. Helpers assert as they go: a helper that cannot set
up its scenario fails the test with a message naming the step that went wrong.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime, timedelta
from typing import TypeAlias

import anyio
import pytest

from worlds.protocol import World
from worlds.types import (
    AttributeValue,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    EventKind,
    NewWorkItem,
    RunRecord,
    RunStarted,
    StartPolicy,
    StepCreated,
    WorkItem,
    utcnow,
)

__all__ = [
    "SHORT_DELAY",
    "STEP",
    "TIMER",
    "WF",
    "WORKER",
    "ConformanceBase",
    "WorldFactory",
    "assert_dense",
    "assert_utc",
    "create_run",
    "keyed_request",
    "lease_all",
    "lease_one",
    "new_run_id",
    "open_worlds",
    "poll_lease",
    "run_with_steps",
    "soon",
]

WorldFactory: TypeAlias = Callable[[], World]
"""What the ``world_factory`` fixture returns: each call gives a new, unopened world
object over the same storage."""

WF = "conformance-wf"
"""The workflow name runs get unless a test names another."""

STEP = "conformance-step"
"""The name of the step items the kit schedules."""

TIMER = "conformance-timer"
"""The name of the timer items the kit schedules."""

WORKER = "worker-1"
"""The worker id of the kit's main worker."""

SHORT_DELAY = 1.0
"""Seconds of the short leases, timers and retry delays the kit waits out.

Long enough that a busy machine does not see a lease expire between two calls
that expect it held (0.3 s was not, with the suite's workers on two loaded
cores), short enough to keep the kit fast.
"""

_sequence = itertools.count(1)


def new_run_id() -> str:
    """A fresh run id that sorts after every id this process made before.

    Ids sort in creation order, so "newest first" means the same whether a
    world orders runs by creation time or by id.
    """
    return f"run-{next(_sequence):08d}-{uuid.uuid4().hex[:12]}"


def assert_utc(moment: datetime | None) -> None:
    """Fail unless ``moment`` is an aware datetime in UTC."""
    assert moment is not None, "expected a timestamp, got None"
    assert moment.tzinfo is not None, f"naive datetime {moment!r}: worlds return aware UTC"
    assert moment.utcoffset() == timedelta(0), f"{moment!r} is not in UTC"


def assert_dense(events: Sequence[EventKind]) -> None:
    """Fail unless ``events`` is a whole log: seq 1, 2, 3... with times that never go back."""
    assert [event.seq for event in events] == list(range(1, len(events) + 1)), (
        f"log sequence numbers are not dense from 1: {[event.seq for event in events]}"
    )
    for event in events:
        assert_utc(event.at)
    moments = [event.at for event in events]
    assert moments == sorted(moments), "event times go backwards along the log"


async def create_run(
    world: World,
    *,
    workflow: str = WF,
    attributes: Mapping[str, AttributeValue] | None = None,
    unique: Collection[str] = (),
    args: bytes = b"",
    run_id: str | None = None,
) -> RunRecord:
    """Create a run that must succeed, and return its record."""
    request = CreateRunRequest(
        run_id=run_id or new_run_id(),
        workflow=workflow,
        args=args,
        attributes=dict(attributes or {}),
        unique=frozenset(unique),
    )
    result = await world.create_run(request)
    assert result.conflict is None, f"create_run unexpectedly conflicted: {result.conflict!r}"
    assert result.run is not None, "create_run returned neither a run nor a conflict"
    assert result.run.id == request.run_id
    return result.run


def keyed_request(value: str, key: str = "cart") -> CreateRunRequest:
    """A run to create holding (``key``, ``value``), as deliver-or-create operations
    (``start_or_resume_hook``, ``update_with_start``) send it: it takes the pair over
    from a closed holder and uses an open one."""
    return CreateRunRequest(
        run_id=new_run_id(),
        workflow=WF,
        args=b"",
        attributes={key: value},
        unique=frozenset({key}),
        policy=StartPolicy(key=key, conflict="use_existing", reuse="allow_duplicate"),
    )


async def lease_all(
    world: World, names: Collection[str], *, worker: str = "probe", lease_seconds: float = 30.0
) -> list[WorkItem]:
    """Lease every due item with one of ``names`` (up to 1000)."""
    return await world.lease(worker, names=names, limit=1000, lease_seconds=lease_seconds)


async def lease_one(
    world: World, name: str, *, worker: str = WORKER, lease_seconds: float = 30.0
) -> WorkItem:
    """Lease the single due item called ``name``; fail unless there is exactly one."""
    items = await world.lease(worker, names={name}, limit=10, lease_seconds=lease_seconds)
    assert len(items) == 1, f"expected exactly one leasable {name!r} item, got {items!r}"
    return items[0]


async def poll_lease(
    world: World,
    names: Collection[str],
    *,
    worker: str = WORKER,
    within: float = 30.0,
    lease_seconds: float = 30.0,
) -> list[WorkItem]:
    """Lease repeatedly until something is due; fail if nothing is within ``within`` s.

    ``within`` is a hang detector, far beyond what a healthy machine needs however
    loaded: the poll returns as soon as an item is due.
    """
    with anyio.move_on_after(within):
        while True:
            items = await world.lease(worker, names=names, limit=10, lease_seconds=lease_seconds)
            if items:
                return items
            await anyio.sleep(0.02)
    pytest.fail(f"no {sorted(names)} item became leasable within {within} s")


async def run_with_steps(
    world: World,
    *,
    steps: int = 1,
    workflow: str = WF,
    lease_steps: bool = False,
    ack: bool = True,
) -> tuple[RunRecord, WorkItem, CommitResult]:
    """A running run whose workflow scheduled ``steps`` step items named ``STEP``.

    Leases the run's workflow item as ``WORKER`` and commits ``RunStarted``, one
    ``StepCreated`` per step and the step items (leased eagerly with
    ``lease_steps``). Returns the run, the workflow item and the commit result.
    """
    run = await create_run(world, workflow=workflow)
    item = await lease_one(world, workflow)
    numbers = range(1, steps + 1)
    result = await world.commit(
        CommitRequest(
            run_id=run.id,
            worker_id=WORKER,
            lease=item,
            events=(
                RunStarted(),
                *(StepCreated(step=n, name=STEP, args=b"") for n in numbers),
            ),
            schedule=tuple(
                NewWorkItem(
                    kind="step", name=STEP, number=n, payload=f"p{n}".encode(), lease=lease_steps
                )
                for n in numbers
            ),
            ack=ack,
        )
    )
    assert result.ok, f"starting the run failed: {result!r}"
    return run, item, result


@asynccontextmanager
async def open_worlds(factory: WorldFactory, count: int) -> AsyncIterator[list[World]]:
    """Open ``count`` world objects over the shared storage; close them on exit."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(factory()) for _ in range(count)]


def soon(seconds: float) -> datetime:
    """The UTC time ``seconds`` from now."""
    return utcnow() + timedelta(seconds=seconds)


class ConformanceBase:
    """The fixtures every part of the kit uses.

    A subclass supplies ``world_factory``; the kit runs on anyio's pytest plugin
    with the asyncio backend.
    """

    @pytest.fixture
    def anyio_backend(self) -> str:
        """Run the kit's async tests on asyncio."""
        return "asyncio"

    @pytest.fixture
    async def world(self, world_factory: WorldFactory) -> AsyncIterator[World]:
        """One world opened from ``world_factory``, closed after the test."""
        async with world_factory() as world:
            yield world
