"""A parent with many child runs (30; 100 with ``WORKFLOW_TEST_FULL=1``) survives
SIGKILLed workers; every child runs once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.childapp import fan_out
from tests.conftest import full_size
from workflow import RunStatus, list_runs, start
from worlds.types import ChildStarted, RunCreated, StepCompleted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHILDREN = full_size(30, 100)


def spawn_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CHILDAPP_LOG": str(log), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.childapp", "--world", url]
    command += ["--lease-seconds", "1", "--concurrency", "8"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


async def _children_started(log: Path, count: int) -> None:
    with anyio.fail_after(120):
        while len(log.read_text().splitlines()) < count:
            await anyio.sleep(0.02)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_parent_with_many_children_survives_a_sigkilled_worker(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = f"sqlite:///{tmp_path}/world.db"
    log = tmp_path / "children.log"
    log.touch()
    async with worlds.open(url) as world:
        run = await start(fan_out, CHILDREN, world=world)
        doomed = spawn_worker(url, log)
        await _children_started(log, CHILDREN // 5)  # mid-way through the fan-out
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        final = spawn_worker(url, log)
        try:
            result = await run.result(timeout=180)
        finally:
            final.send_signal(signal.SIGTERM)
            assert final.wait(timeout=30) == 0, final.stderr.read() if final.stderr else ""
        assert result == [f"label-{i}" for i in range(CHILDREN)]
        started = [e for e in await run.events() if isinstance(e, ChildStarted)]
        assert sorted(e.child for e in started) == list(range(1, CHILDREN + 1))
        children = []
        cursor = None
        while True:
            page = await list_runs(query=f"`$parent` = '{run.id}'", cursor=cursor, world=world)
            children += [r.id for r in page]
            if (cursor := page.next_cursor) is None:
                break
        # exactly one run per child start, each created once and completed once
        assert sorted(children) == sorted(e.run_id for e in started)
        for child_id in children:
            child = await world.get_run(child_id)
            assert child is not None and child.status is RunStatus.COMPLETED
            events = await world.read_events(child_id)
            assert sum(isinstance(e, RunCreated) for e in events) == 1
            assert sum(isinstance(e, StepCompleted) for e in events) == 1
