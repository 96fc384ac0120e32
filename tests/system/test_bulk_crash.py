"""A bulk retry whose process is SIGKILLed mid-way resumes: exact counts, no run
reopened twice (SQLite and PostgreSQL, real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import worlds
from tests.apps.bulkapp import parked
from tests.conftest import full_size
from workflow import cancel_runs, list_runs, retry_runs, start
from worlds.types import RunReopened

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
COUNT = full_size(1_200, 1_600)  # three (four) pages of the $bulk workflow: killed in the 2nd


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_killed_bulk_retry_resumes_and_reopens_each_run_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = f"sqlite:///{tmp_path}/world.db"
    query = "batch = 'k'"
    async with worlds.open(url) as world:
        ids = [
            (await start(parked, n, attributes={"batch": "k"}, world=world)).id
            for n in range(COUNT)
        ]
        await cancel_runs(query, grace=None, world=world)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.apps.bulkapp", url, "retry", query],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        handled = 0
        for line in proc.stdout:  # kill it once it is well inside the second page
            if line.startswith("progress "):
                handled = int(line.split()[1])
                if handled >= 700:
                    break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert 700 <= handled < COUNT, "the process was killed mid-way"
        bulk = await list_runs(workflow="$bulk", world=world)
        interrupted = [run for run in bulk if run.record and not run.record.status.is_closed]
        assert len(interrupted) == 1
        # the same action again attaches to the interrupted run and finishes it
        result = await retry_runs(query, world=world)
        assert result.run_id == interrupted[0].id
        assert (result.matched, result.done, result.failed) == (COUNT, COUNT, 0)
        for run_id in ids:
            reopened = [e for e in await world.read_events(run_id) if isinstance(e, RunReopened)]
            assert len(reopened) == 1, run_id
            assert f"bulk run {result.run_id}" in reopened[0].by
