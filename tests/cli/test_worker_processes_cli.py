"""``wf worker --processes N``: N worker processes under one supervisor, which forwards
signals to them and stops them all when one ends on its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.slowapp import slow_flow
from workflow import RunStatus, get_run, list_workers, start
from worlds.types import WorkerRecord

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


def supervisor(url: str, log: Path, processes: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLOWAPP_LOG": str(log)}
    env["SLOWAPP_SECONDS"] = "0.3"
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.slowapp", "--world", url]
    command += ["--processes", str(processes), "--lease-seconds", "5"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)


async def live_workers(url: str, count: int) -> list[WorkerRecord]:
    """The live workers of the world at ``url``, once there are ``count``."""
    async with worlds.open(url) as world:
        with anyio.fail_after(60):
            while (
                len(live := [w for w in await list_workers(world=world) if w.status == "live"])
                < count
            ):
                await anyio.sleep(0.05)
    return live


async def ended(proc: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    return proc.returncode, err


async def test_the_processes_share_the_work_and_stop_together(tmp_path: Path) -> None:
    url, log = f"sqlite:///{tmp_path}/world.db", tmp_path / "log"
    async with worlds.open(url) as world:
        ids = [(await start(slow_flow, world=world)).id for _ in range(6)]
    proc = supervisor(url, log, processes=2)
    workers = await live_workers(url, 2)
    assert len({w.pid for w in workers}) == 2
    assert proc.pid not in {w.pid for w in workers}  # the supervisor serves nothing itself
    async with worlds.open(url) as world:
        for run_id in ids:
            assert await get_run(run_id, world=world).result(timeout=60) == "done"
    proc.send_signal(signal.SIGTERM)
    code, err = await ended(proc)
    assert code == 0, err
    assert "Traceback" not in err
    async with worlds.open(url) as world:
        statuses = {w.pid: w.status for w in await list_workers(world=world)}
        for run_id in ids:
            assert await get_run(run_id, world=world).status() is RunStatus.COMPLETED
    assert statuses == {w.pid: "stopped" for w in workers}  # each said goodbye


async def test_a_worker_process_that_dies_stops_the_others(tmp_path: Path) -> None:
    url, log = f"sqlite:///{tmp_path}/world.db", tmp_path / "log"
    proc = supervisor(url, log, processes=2)
    killed, other = await live_workers(url, 2)
    os.kill(killed.pid, signal.SIGKILL)
    code, err = await ended(proc)
    assert code == 128 + signal.SIGKILL, err
    assert f"worker process {killed.pid} ended (exit code {code}): stopping the others" in err
    async with worlds.open(url) as world:
        statuses = {w.pid: w.status for w in await list_workers(world=world)}
    assert statuses[other.pid] == "stopped"  # stopped gracefully, not left running


def test_a_module_with_nothing_to_serve_ends_the_processes_with_its_error(
    tmp_path: Path,
) -> None:
    (tmp_path / "empty.py").write_text("VALUE = 1\n")
    command = [sys.executable, "-m", "cli", "worker", str(tmp_path / "empty.py")]
    command += ["--processes", "2", "--world", f"sqlite:///{tmp_path}/world.db"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "defines no @workflow or @step" in done.stderr


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--world=nosuch://x", "nosuch"),
        ("--codec=nosuchmodule:codec", "nosuchmodule"),
    ],
)
def test_bad_input_is_one_line_before_any_process_starts(
    tmp_path: Path, option: str, says: str
) -> None:
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.slowapp", "--processes", "2"]
    done = subprocess.run([*command, option], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert says in done.stderr
    assert "supervising" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
