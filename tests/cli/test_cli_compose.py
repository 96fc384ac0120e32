"""``wf runs show`` (parent and children), ``wf runs stream``, ``wf runs retry|fork``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import worlds
from tests.apps import composeapp
from tests.apps.composeapp import helper, reporter, stage
from tests.cli.test_cli import wf, wf_in
from workflow import Limited, Run, RunFailedError, RunStatus, Worker, get_run, start, workflow
from worlds.types import RunForked, RunReopened

pytestmark = pytest.mark.anyio


APP = [reporter, helper, stage]


@dataclass
class Failed:
    """A ``reporter`` run failed at its stage 2, and its completed child."""

    url: str
    run: Run[int]
    child: Run[Any]


@pytest.fixture
async def failed(tmp_path: Path) -> AsyncIterator[Failed]:
    url = f"sqlite:///{tmp_path}/world.db"
    composeapp.BROKEN.add(2)
    try:
        async with worlds.open(url) as world:
            async with Worker(world, APP):
                run = await start(reporter, world=world)
                with pytest.raises(RunFailedError):
                    await run.result(timeout=30)
            (child,) = await run.children()
        yield Failed(url, run, child)
    finally:
        composeapp.BROKEN.clear()


async def test_runs_show_names_the_parent_and_the_children(failed: Failed) -> None:
    url, run, child = failed.url, failed.run, failed.child
    shown = await wf_in(url, "runs", "show", run.id)
    assert shown.code == 0 and "children" in shown.out and child.id in shown.out
    as_json = (await wf_in(url, "runs", "show", child.id, "--json")).json()
    assert as_json["parent"] == run.id and as_json["children"] == []


async def test_runs_stream_prints_a_stream_from_a_start(failed: Failed) -> None:
    url, run = failed.url, failed.run
    streamed = wf(url, "runs", "stream", run.id, "progress")
    assert streamed.code == 0
    assert [json.loads(line) for line in streamed.out.splitlines()] == [
        {"pct": 0},
        {"pct": 50},
        {"pct": 100},
    ]
    tail = await wf_in(url, "runs", "stream", run.id, "progress", "--start", "2", "--no-follow")
    assert [json.loads(line) for line in tail.out.splitlines()] == [{"pct": 100}]


async def test_runs_fork_from_a_step(failed: Failed) -> None:
    url, run = failed.url, failed.run
    forked = wf(url, "runs", "fork", run.id, "--from-step", "2")
    assert forked.code == 0, forked.err
    fork_id = forked.out.split()[-1]
    assert (await wf_in(url, "runs", "fork", run.id, "--from-step", "9")).code == 1
    composeapp.BROKEN.clear()
    async with worlds.open(url) as world:
        fork = get_run(fork_id, world=world)
        assert await fork.status() is not None
        async with Worker(world, APP):
            assert await fork.result(timeout=30) == 6
        (marker,) = [e for e in await fork.events() if isinstance(e, RunForked)]
    assert (marker.source_run_id, marker.from_step) == (run.id, 2)


async def test_runs_retry_reopens_the_failed_run(failed: Failed) -> None:
    url, run, child = failed.url, failed.run, failed.child
    composeapp.BROKEN.clear()
    retried = wf(url, "runs", "retry", run.id)
    assert retried.code == 0 and run.id in retried.out
    assert (await wf_in(url, "runs", "retry", child.id)).code == 1  # completed: nothing to retry
    async with worlds.open(url) as world:
        again = get_run(run.id, world=world)
        async with Worker(world, APP):
            assert await again.result(timeout=30) == 6
        (reopened,) = [e for e in await again.events() if isinstance(e, RunReopened)]
    assert "@" in reopened.by
    timeline = (await wf_in(url, "runs", "show", run.id, "--events", "all")).out
    assert f"reopened by {reopened.by}" in timeline and "stream progress" in timeline


@workflow
async def limited_report() -> str:
    return "done"


async def test_runs_retry_says_a_reopened_run_waits_for_its_slot(tmp_path: Path) -> None:
    """A retried run takes its ``Limited`` slot again before it runs (issue 33, item 1)."""
    url = f"sqlite:///{tmp_path}/world.db"
    limited = {"tenant": Limited("x", 1)}
    async with worlds.open(url) as world:
        first = await start(limited_report, attributes=limited, world=world)
        await first.cancel("later", grace=None)
        holder = await start(limited_report, attributes=limited, world=world)
        retried = await wf_in(url, "runs", "retry", first.id)
        assert retried.code == 0, retried.err
        assert f"reopened run {first.id} (pending: it waits for a slot" in retried.out
        assert await first.status() is RunStatus.PENDING
        shown = await wf_in(url, "runs", "show", first.id)
        assert "waiting for tenant=x (to go on): 1 of 1 slots held by " + holder.id in shown.out
        holders = await wf_in(url, "attributes", "holders", "tenant", "x")
        assert "waiting (to go on)" in holders.out
        await holder.cancel(grace=None)
        assert await first.status() is RunStatus.RUNNING  # promoted: its slot, its work
        async with Worker(world, [limited_report]):
            assert await first.result(timeout=30) == "done"
