"""``wf runs show`` (parent and children), ``wf runs stream``, ``wf runs retry|fork``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import worlds
from tests.apps import composeapp
from tests.apps.composeapp import helper, reporter, stage
from tests.cli.test_cli import wf, wf_in
from workflow import Limited, RunFailedError, RunStatus, Worker, get_run, start, workflow
from worlds.types import RunForked, RunReopened

pytestmark = pytest.mark.anyio


async def test_runs_show_stream_retry_and_fork(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    composeapp.BROKEN.add(2)
    async with worlds.open(url) as world:
        async with Worker(world, [reporter, helper, stage]):
            run = await start(reporter, world=world)
            with pytest.raises(RunFailedError):
                await run.result(timeout=30)
        (child,) = await run.children()

        shown = await wf_in(url, "runs", "show", run.id)
        assert shown.code == 0 and "children" in shown.out and child.id in shown.out
        as_json = (await wf_in(url, "runs", "show", child.id, "--json")).json()
        assert as_json["parent"] == run.id and as_json["children"] == []

        streamed = wf(url, "runs", "stream", run.id, "progress")
        assert streamed.code == 0
        assert [json.loads(line) for line in streamed.out.splitlines()] == [
            {"pct": 0},
            {"pct": 50},
            {"pct": 100},
        ]
        tail = await wf_in(url, "runs", "stream", run.id, "progress", "--start", "2", "--no-follow")
        assert [json.loads(line) for line in tail.out.splitlines()] == [{"pct": 100}]

        forked = wf(url, "runs", "fork", run.id, "--from-step", "2")
        assert forked.code == 0, forked.err
        fork_id = forked.out.split()[-1]
        assert await get_run(fork_id, world=world).status() is not None
        assert (await wf_in(url, "runs", "fork", run.id, "--from-step", "9")).code == 1

        composeapp.BROKEN.clear()
        retried = wf(url, "runs", "retry", run.id)
        assert retried.code == 0 and run.id in retried.out
        assert (
            await wf_in(url, "runs", "retry", child.id)
        ).code == 1  # completed: nothing to retry
        async with Worker(world, [reporter, helper, stage]):
            assert await run.result(timeout=30) == 6
            assert await get_run(fork_id, world=world).result(timeout=30) == 6
        (reopened,) = [e for e in await run.events() if isinstance(e, RunReopened)]
        assert "@" in reopened.by
        timeline = (await wf_in(url, "runs", "show", run.id, "--events", "all")).out
        assert f"reopened by {reopened.by}" in timeline and "stream progress" in timeline
        (marker,) = [
            e for e in await get_run(fork_id, world=world).events() if isinstance(e, RunForked)
        ]
        assert (marker.source_run_id, marker.from_step) == (run.id, 2)


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
