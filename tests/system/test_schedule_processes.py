"""Schedules fired by worker processes: a fire time starts one run, however many fire it.

Three ``wf worker`` processes share an SQLite or PostgreSQL world with an
``every=1s`` schedule; one of them is killed (SIGKILL, mid-whatever) and a
fresh one started while the schedule keeps firing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.schedapp import scheduled_tick
from tests.conftest import world_url
from workflow import list_runs
from workflow.schedules import Overlap, create_schedule
from worlds.protocol import World

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _worker(url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.schedapp", "--world", url]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def _fired(world: World, count: int) -> None:
    """Wait (two minutes at most) until the schedule has started ``count`` runs."""
    with anyio.fail_after(120):
        while len(await list_runs(attributes={"$schedule": "processes"}, world=world)) < count:
            await anyio.sleep(0.2)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_worker_processes_start_one_run_per_fire_time(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = world_url(kind, tmp_path)
    async with worlds.open(url) as world:
        await create_schedule(
            scheduled_tick,
            "p",
            id="processes",
            every=timedelta(seconds=1),
            overlap=Overlap.ALLOW_ALL,
            world=world,
        )
        workers = [_worker(url) for _ in range(3)]
        try:
            # by the runs the schedule started, not by the clock: on a loaded machine the
            # workers take seconds just to start
            await _fired(world, 3)
            workers[0].send_signal(signal.SIGKILL)
            workers.append(_worker(url))
            await _fired(world, 6)
        finally:
            for proc in workers:
                proc.terminate()
            for proc in workers:
                proc.wait(timeout=30)
        runs = await list_runs(attributes={"$schedule": "processes"}, limit=1000, world=world)
        times: list[datetime] = []
        for run in runs:
            at = (await run.attributes())["$scheduled_at"]
            assert isinstance(at, datetime)
            times.append(at)
        times.sort()
    assert len(times) == len(set(times)), "a fire time started two runs"
    assert len(times) >= 6, times
    gaps = [b - a for a, b in pairwise(times)]
    assert all(gap == timedelta(seconds=1) for gap in gaps), times
