"""``wf worker`` processes on an SQLite file that goes away or fills up (issue 33).

A file deleted or replaced under the worker stops it with one line, before it
acknowledges anything into a file nobody can open again. A full world is an
outage: the worker keeps its leases, says so (when it begins and ends) and
carries on once space is freed, with nothing acknowledged lost.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

import worlds
from tests.apps.ballast import RESULT_SIZE, free, full_while_bulky_runs
from tests.apps.slowapp import slow_flow
from workflow import RunStatus, start

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def spawn(module: str, url: str, **env: str) -> subprocess.Popen[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    command = [sys.executable, "-m", "cli", "worker", module, "--world", url]
    return subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.PIPE, text=True)


async def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=timeout))
    return err


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_worker_stops_with_one_line_when_its_file_is_deleted_or_replaced(
    tmp_path: Path, how: str
) -> None:
    path, log = tmp_path / "world.db", tmp_path / "log"
    url = f"sqlite:///{path}"
    proc = spawn("tests.apps.slowapp", url, SLOWAPP_LOG=str(log), SLOWAPP_SECONDS="0")
    try:
        async with worlds.open(url) as world:
            run = await start(slow_flow, world=world)
            assert await run.result(timeout=30) == "done"
        if how == "deleted":
            path.unlink()
        else:
            other = tmp_path / "other.db"
            async with worlds.open(f"sqlite:///{other}") as world:
                await world.info()
            os.replace(other, path)
            for stale in ("-wal", "-shm"):
                Path(f"{path}{stale}").unlink(missing_ok=True)
        err = await finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert f"{path} was {how}" in err
    assert len(err.strip().splitlines()) <= 3, err  # serving, the worker's reason, the exit
    if how == "replaced":  # the file now at the path got nothing from the worker
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)


async def test_a_full_world_is_an_outage_the_worker_process_rides_out(tmp_path: Path) -> None:
    """The worker's connection may grow the file to 200 pages (``max_pages``, SQLite's
    own SQLITE_FULL); an operator's connection fills it past that. The step's result
    cannot be committed: the worker says the world is full, keeps its lease and
    retries; once the operator prunes runs, the result lands and the run completes,
    its body run once, and every run acknowledged before is still there."""
    path = tmp_path / "world.db"
    journal, gate = tmp_path / "journal", tmp_path / "gate"
    async with worlds.open(f"sqlite:///{path}") as operator:
        await operator.info()  # the file exists before the worker caps it
        proc = spawn("tests.apps.bulky", f"sqlite:///{path}?max_pages=200")
        try:
            run, kept, filler = await full_while_bulky_runs(operator, path, journal, gate)
            with anyio.fail_after(30):
                while "end" not in journal.read_text():
                    await anyio.sleep(0.05)
            await anyio.sleep(3)  # commits fail meanwhile; the worker must live on
            assert proc.poll() is None, "the worker exited on a full world"
            await free(filler, operator)
            assert await run.result(timeout=60) == RESULT_SIZE
            assert await kept.status() is RunStatus.PENDING
            proc.terminate()
            err = await finish(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert journal.read_text().splitlines() == ["start", "end"]
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert len([line for line in lines if "the world is full" in line]) == 1, err
    assert len([line for line in lines if "the world has room again" in line]) == 1, err
    assert not [line for line in lines if "stops" in line], err
