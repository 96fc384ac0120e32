"""Conformance: a ``RunFailed`` naming a handler starts the handler's run, once."""

from __future__ import annotations

import anyio
import pytest

from worlds.protocol import World
from worlds.query import AttrRef, Compare, RunQuery
from worlds.semantics import ON_FAILURE_OF_KEY, handler_run_id
from worlds.testing._base import (
    WF,
    WORKER,
    ConformanceBase,
    WorldFactory,
    create_run,
    lease_one,
    open_worlds,
)
from worlds.types import (
    CommitRequest,
    ErrorInfo,
    FailureHandler,
    RunCreated,
    RunFailed,
    RunReopened,
    RunStarted,
    RunStatus,
)

__all__ = ["FailureHandlerConformance"]

HANDLER = "conformance-handler"
BOOM = ErrorInfo(type="ValueError", message="boom")


def _failed(args: bytes = b"handler-args") -> RunFailed:
    return RunFailed(error=BOOM, handler=FailureHandler(workflow=HANDLER, args=args))


class FailureHandlerConformance(ConformanceBase):
    """``RunFailed.handler`` (``@workflow(on_failure=...)``; ``worlds._rules.failures``)."""

    @pytest.mark.anyio
    async def test_the_failing_commit_starts_the_handler_run(self, world: World) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        result = await world.commit(
            CommitRequest(
                run_id=run.id, worker_id=WORKER, lease=item, events=(RunStarted(), _failed())
            )
        )
        assert result.ok
        handler = await world.get_run(handler_run_id(run.id))
        assert handler is not None
        assert handler.workflow == HANDLER
        assert handler.status is RunStatus.PENDING
        assert handler.attributes[ON_FAILURE_OF_KEY] == run.id
        (created,) = await world.read_events(handler.id)
        assert isinstance(created, RunCreated)
        assert created.args == b"handler-args"
        assert created.attributes[ON_FAILURE_OF_KEY] == run.id
        work = await lease_one(world, HANDLER)
        assert work.run_id == handler.id
        stored = await world.get_run(run.id)
        assert stored is not None and stored.status is RunStatus.FAILED

    @pytest.mark.anyio
    async def test_a_failure_without_handler_or_refused_starts_nothing(self, world: World) -> None:
        plain = await create_run(world)
        item = await lease_one(world, WF)
        request = CommitRequest(
            run_id=plain.id, worker_id=WORKER, lease=item, events=(RunFailed(error=BOOM),)
        )
        assert (await world.commit(request)).ok
        assert await world.get_run(handler_run_id(plain.id)) is None
        # a commit that is refused (its lease is gone) starts no handler
        other = await create_run(world)
        leased = await lease_one(world, WF)
        stale = CommitRequest(
            run_id=other.id, worker_id="not-the-holder", lease=leased, events=(_failed(),)
        )
        assert not (await world.commit(stale)).ok
        assert await world.get_run(handler_run_id(other.id)) is None

    @pytest.mark.anyio
    async def test_a_second_failure_of_a_reopened_run_starts_no_second_handler(
        self, world: World
    ) -> None:
        run = await create_run(world)
        item = await lease_one(world, WF)
        first = CommitRequest(run_id=run.id, worker_id=WORKER, lease=item, events=(_failed(b"1"),))
        assert (await world.commit(first)).ok
        assert await world.reopen_run(run.id, by="conformance") is not None
        again = await lease_one(world, WF)
        second = CommitRequest(
            run_id=run.id, worker_id=WORKER, lease=again, events=(_failed(b"2"),)
        )
        assert (await world.commit(second)).ok
        events = await world.read_events(run.id)
        assert sum(isinstance(e, RunFailed) for e in events) == 2
        assert any(isinstance(e, RunReopened) for e in events)
        (created, *_) = await world.read_events(handler_run_id(run.id))
        assert isinstance(created, RunCreated) and created.args == b"1"

    @pytest.mark.anyio
    async def test_racing_commits_of_one_failure_start_one_handler(
        self, world_factory: WorldFactory
    ) -> None:
        async with open_worlds(world_factory, 3) as opened:
            run = await create_run(opened[0])
            item = await lease_one(opened[0], WF)
            results: list[bool] = []

            async def fail(world: World) -> None:
                request = CommitRequest(
                    run_id=run.id, worker_id=WORKER, lease=item, events=(_failed(),)
                )
                results.append((await world.commit(request)).ok)

            async with anyio.create_task_group() as group:
                for world in opened * 2:
                    group.start_soon(fail, world)
            assert results.count(True) == 1
            where = Compare(AttrRef(ON_FAILURE_OF_KEY), "=", run.id)
            page = await opened[2].list_runs(RunQuery(where=where))
            assert [r.id for r in page.runs] == [handler_run_id(run.id)]
