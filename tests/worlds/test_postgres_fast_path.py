"""Parity of the PostgreSQL world's two commit paths.

Most commits go through the one-round-trip ``commit_run`` PL/pgSQL function
(``worlds.postgres.fast``); the rest through the general multi-statement
transaction that drives ``worlds._rules``. The same scripted sequence of
requests sent to two fresh schemas, one with the fast path and one without,
must leave the same logs, run records, claims and work queue, and get the same
answers (times and fencing tokens aside: they are drawn anew each time).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from tests.conftest import drop_schema, fresh_schema, with_schema
from worlds.postgres import PostgresWorld
from worlds.postgres.fast import commit_params
from worlds.types import (
    AttributeSet,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    ErrorInfo,
    NewWorkItem,
    RunCancelled,
    RunCompleted,
    RunStarted,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepRetrying,
    StepStarted,
    WaitCreated,
    WorkItem,
)

pytestmark = pytest.mark.anyio

PAST = datetime(2024, 1, 1, tzinfo=UTC)
FAR = datetime(2999, 1, 1, tzinfo=UTC)
BOOM = ErrorInfo(type="ValueError", message="boom")


@pytest.fixture
def two_urls(postgres_url: str) -> Iterator[tuple[str, str]]:
    urls = (with_schema(postgres_url, fresh_schema()), with_schema(postgres_url, fresh_schema()))
    yield urls
    for url in urls:
        drop_schema(url)


def _plain(value: Any) -> Any:
    """``value`` as builtins, with times and fencing tokens (drawn anew per run) taken out."""
    built = msgspec.to_builtins(value)

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: "<t>"
                if key
                in ("at", "created_at", "started_at", "closed_at", "deadline", "lease_expires_at")
                and item is not None
                else "<token>"
                if key == "token" and isinstance(item, int)
                else strip(item)
                for key, item in node.items()
            }
        if isinstance(node, (list, tuple)):
            return [strip(item) for item in node]
        return node

    return strip(built)


class Script:
    """Sends the scripted requests to ``world`` and notes every answer."""

    def __init__(self, world: PostgresWorld) -> None:
        self.world = world
        self.answers: list[Any] = []
        self.fast: list[bool] = []

    async def create(self, run_id: str) -> None:
        request = CreateRunRequest(run_id=run_id, workflow="wf", args=b"a")
        self.answers.append(_plain(await self.world.create_run(request)))

    async def lease(self, *names: str) -> list[WorkItem]:
        items = await self.world.lease("w1", names=names, limit=10, lease_seconds=60)
        self.answers.append(_plain(items))
        return items

    async def commit(self, lease: WorkItem | None, *events: Any, **fields: Any) -> CommitResult:
        request = CommitRequest(
            run_id=fields.pop("run_id", None) or (lease.run_id if lease else ""),
            worker_id="w1",
            lease=lease,
            events=events,
            lease_seconds=60,
            **fields,
        )
        self.fast.append(commit_params(request, PAST, "c", "r") is not None)
        try:
            result = await self.world.commit(request)
        except LookupError as exc:
            self.answers.append(("LookupError", str(exc)))
            return CommitResult(ok=False, status="pending")  # type: ignore[arg-type]
        self.answers.append(_plain(result))
        return result

    async def state(self, run_ids: list[str]) -> list[Any]:
        """Every run's record, log and claims, then what is left in the queue."""
        seen = []
        for run_id in run_ids:
            seen.append(_plain(await self.world.get_run(run_id)))
            seen.append(_plain(await self.world.read_events(run_id)))
            seen.append(_plain(await self.world.run_claims(run_id)))
        names = ["wf", "s1", "s2", "s3"]
        queue = await self.world.lease("w2", names=names, limit=50, lease_seconds=60)
        seen.append(_plain(queue))
        await self.world.release("w2", queue)
        return seen


def _by(items: list[WorkItem], kind: str, number: int = 0) -> WorkItem:
    return next(item for item in items if item.kind == kind and item.number == number)


async def _scenario(world: PostgresWorld) -> tuple[list[Any], list[Any], list[bool]]:
    s = Script(world)
    for run_id in ("pa", "pb", "pc"):
        await s.create(run_id)
    first = await s.lease("wf")
    task = next(item for item in first if item.run_id == "pa")
    # a workflow task: starts, creates two steps (one leased at once) and a timer
    started = await s.commit(
        task,
        RunStarted(),
        StepCreated(step=1, name="s1", args=b"1"),
        StepCreated(step=2, name="s2", args=b"2"),
        StepCreated(step=3, name="s3", args=b"3"),
        WaitCreated(wait=1, until=FAR),
        schedule=(
            NewWorkItem(kind="step", name="s1", number=1, lease=True),
            NewWorkItem(kind="step", name="s2", number=2),
            NewWorkItem(kind="step", name="s3", number=3, available_at=FAR),
            NewWorkItem(kind="timer", number=1, available_at=FAR),
        ),
    )
    step1 = _by(list(started.leased), "step", 1)
    # step 1 fails and retries now; the run's workflow item wakes
    await s.commit(
        step1,
        StepRetrying(step=1, attempt=1, error=BOOM, retry_at=PAST),
        schedule=(
            NewWorkItem(kind="step", name="s1", number=1, attempt=2, available_at=PAST),
            NewWorkItem(kind="workflow"),
        ),
    )
    # a zombie of attempt 1 comes back: refused, then refused with its result recorded
    await s.commit(step1, StepCompleted(step=1, attempt=1, result=b"late"))
    await s.commit(
        step1,
        StepCompleted(step=1, attempt=1, result=b"late"),
        discard=StepDiscarded(step=1, attempt=1, outcome="completed"),
    )
    steps = await s.lease("s1", "s2")
    # step 2 claims a unique pair and sets a plain attribute; step 1's retry succeeds
    await s.commit(
        _by(steps, "step", 2),
        AttributeSet(key="owner", value="x", unique=True, step=2, attempt=1),
        AttributeSet(key="note", value="n", step=2, attempt=1),
        StepCompleted(step=2, attempt=1, result=b"two"),
        schedule=(NewWorkItem(kind="workflow"),),
    )
    await s.commit(
        _by(steps, "step", 1),
        AttributeSet(key="tag", value=7, step=1, attempt=2),
        StepCompleted(step=1, attempt=2, result=b"one"),
        schedule=(NewWorkItem(kind="workflow", lease=True),),
        ack=True,
    )
    # the workflow task of run pb completes it; a late commit to it is refused
    task_b = next(item for item in first if item.run_id == "pb")
    await s.commit(task_b, RunStarted(), RunCompleted(result=b"done"))
    await s.commit(task_b, StepStarted(step=1, attempt=1))
    await s.commit(
        None,
        StepCompleted(step=1, attempt=1, result=b"x"),
        run_id="pb",
        discard=StepDiscarded(step=1, attempt=1, outcome="completed"),
    )
    # a commit without a lease to a missing run
    await s.commit(None, RunStarted(), run_id="nope")
    # run pc: cancel requested, then its task records the cancellation
    s.answers.append(_plain(await world.request_cancel("pc", "stop", 30.0)))
    task_c = next(item for item in first if item.run_id == "pc")
    await s.commit(task_c, RunStarted(), AttributeSet(key="phase", value="stopping"))
    await s.commit(None, RunCancelled(reason="stop"), run_id="pc")
    before = await s.state(["pa", "pb", "pc"])
    # run pa is cancelled outright
    s.answers.append(_plain(await world.cancel_run("pa", "enough")))
    return s.answers, [before, await s.state(["pa", "pb", "pc"])], s.fast


async def test_fast_and_general_commit_paths_leave_the_same_world(
    two_urls: tuple[str, str],
) -> None:
    fast_url, general_url = two_urls
    async with PostgresWorld(fast_url) as fast_world:
        fast = await _scenario(fast_world)
    async with PostgresWorld(general_url, fast_commits=False) as general_world:
        general = await _scenario(general_world)
    qualifies = fast[2]
    assert qualifies == general[2]
    # the script exercises both paths: most commits qualify, some need the general one
    assert qualifies.count(True) >= 6 and qualifies.count(False) >= 2
    assert fast[0] == general[0]
    assert fast[1] == general[1]


def _done(item: WorkItem, horizon: int, at: datetime | None = None) -> CommitRequest:
    """Step ``item``'s result, committed conditionally on ``horizon`` (one transaction
    per step)."""
    return CommitRequest(
        run_id=item.run_id,
        worker_id="w1",
        lease=item,
        events=(StepCompleted(step=item.number, attempt=item.attempt, result=b"r"),),
        expect_seq=horizon,
        at=at,
    )


async def _conditional_scenario(world: PostgresWorld) -> tuple[list[Any], list[Any]]:
    """Conditional commits and a batch: applied, rechecked (a step's attribute after
    the horizon), stale (an event the workflow did not see; a time before the log's)."""
    s = Script(world)
    runs = ["ca", "cb", "cc", "cd"]
    for run_id in runs:
        await s.create(run_id)
    steps: dict[str, list[WorkItem]] = {}
    for task in sorted(await s.lease("wf"), key=lambda item: item.run_id):
        created = (StepCreated(step=n, name=f"s{n}", args=b"") for n in (1, 2))
        scheduled = tuple(
            NewWorkItem(kind="step", name=f"s{n}", number=n, lease=True) for n in (1, 2)
        )
        result = await s.commit(task, RunStarted(), *created, schedule=scheduled)
        steps[task.run_id] = sorted(result.leased, key=lambda item: item.number)
    horizon = 4  # RunCreated, RunStarted and two StepCreated
    await s.commit(steps["cb"][0], AttributeSet(key="phase", value="busy", step=1), ack=False)
    await s.commit(None, WaitCreated(wait=1, until=FAR), run_id="cc")
    for run_id, at in (("ca", world.now()), ("cb", None), ("cc", None), ("cd", PAST)):
        s.answers.append(_plain(await world.commit(_done(steps[run_id][0], horizon, at))))
    batch = [_done(steps[run_id][1], horizon) for run_id in runs]
    s.answers.append(_plain(await world.commit_many(batch)))
    return s.answers, await s.state(runs)


async def test_conditional_commits_and_batches_take_either_path_alike(
    two_urls: tuple[str, str],
) -> None:
    fast_url, general_url = two_urls
    async with PostgresWorld(fast_url) as fast_world:
        fast = await _conditional_scenario(fast_world)
    async with PostgresWorld(general_url, fast_commits=False) as general_world:
        general = await _conditional_scenario(general_world)
    assert fast == general
    stale = [answer["stale"] for answer in fast[0][-5:-1]]
    assert stale == [False, False, True, True]
    assert [outcome["stale"] for outcome in fast[0][-1]] == [True, True, True, False]
