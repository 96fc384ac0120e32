"""Concurrency claims across OS processes sharing one world (SQLite here; the
PostgreSQL world's tests repeat them)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import anyio
import pytest

import worlds
from workflow import RunStatus, Worker, find_run, get_run, list_runs
from worlds.types import RunCancelled, RunCreated, StepStarted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def contend(url: str, mode: str, count: int, value: str, processes: int = 4) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.apps.contend", url, mode, str(count), value]
    procs = [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    outcomes: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        outcomes += json.loads(out)
    return outcomes


async def test_unique_start_across_four_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    outcomes = await anyio.to_thread.run_sync(contend, url, "unique", 13, "o-proc")
    created = [o.split()[1] for o in outcomes if o.startswith("run ")]
    assert len(created) == 1, outcomes
    assert sorted(outcomes) == sorted([f"run {created[0]}"] + [f"conflict {created[0]}"] * 51)
    async with worlds.open(url) as world:
        assert len(await list_runs(world=world)) == 1
        holder = await find_run("order", "o-proc", world=world)
        assert holder is not None and holder.id == created[0]


async def test_newest_wins_across_four_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    outcomes = await anyio.to_thread.run_sync(contend, url, "cancel", 5, "o-plan")
    ids = [o.split()[1] for o in outcomes]
    assert len(set(ids)) == 20
    async with worlds.open(url) as world:
        from tests.apps.contend import plan

        holder = await find_run("order", "o-plan", world=world)
        assert holder is not None
        spans: list[tuple[datetime, datetime | None]] = []
        for run_id in ids:
            run = get_run(run_id, world=world)
            status = await run.status()
            events = await run.events()
            created = next(e.at for e in events if isinstance(e, RunCreated))
            if run_id == holder.id:
                assert not status.is_closed
                spans.append((created, None))
                continue
            assert status is RunStatus.CANCELLED
            cancelled = next(e for e in events if isinstance(e, RunCancelled))
            assert cancelled.reason is not None and cancelled.reason.startswith("superseded")
            # fenced: no step of it started after its cancellation committed
            assert all(e.at <= cancelled.at for e in events if isinstance(e, StepStarted))
            spans.append((created, cancelled.at))
        # at every moment at most one unfenced holder: the holding spans never overlap
        spans.sort(key=lambda span: span[0])
        for (_, end), (start_next, _) in itertools.pairwise(spans):
            assert end is not None and end <= start_next
        assert spans[-1][1] is None
        async with Worker(world, [plan]):
            assert await holder.result(timeout=60) == 50
