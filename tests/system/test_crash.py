"""Kill ``wf worker`` processes mid-flight with SIGKILL; every run must still finish.

Each step body logs its start. A step may run more than once (at-least-once),
but never after its completion was recorded in the log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.crashapp import chain
from tests.system.running import errors_of
from workflow import RunStatus, start
from worlds.types import StepCompleted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def spawn_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CRASHAPP_LOG": str(log), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "worker",
            "tests.apps.crashapp",
            "--world",
            url,
            "--lease-seconds",
            "1",
            "--concurrency",
            "8",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def expected(n: int, seed: int) -> int:
    return seed + sum(range(n))


async def _steps_in_flight(log: Path, more: int = 5) -> None:
    """Wait until ``more`` step bodies have started since now (each takes 0.15 s),
    so that a kill right after lands in the middle of a step however slow the
    machine is today."""
    before = log.read_text().count("start ")
    with anyio.fail_after(60):
        while log.read_text().count("start ") < before + more:
            await anyio.sleep(0.02)


async def crash_and_recover(url: str, tmp_path: Path, workers: int = 1) -> None:
    """Kill ``workers`` worker processes twice, then let ``workers`` fresh ones finish."""
    log = tmp_path / "steps.log"
    log.touch()
    world = worlds.open(url)
    async with world:
        runs = [await start(chain, 15, seed, world=world) for seed in range(10)]
        for _ in range(2):
            procs = [spawn_worker(url, log) for _ in range(workers)]
            await _steps_in_flight(log)
            for proc in procs:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        final = [spawn_worker(url, log) for _ in range(workers)]
        try:
            for seed, run in enumerate(runs):
                assert await run.result(timeout=60) == expected(15, seed)
        finally:
            for proc in final:
                proc.send_signal(signal.SIGTERM)
            for proc in final:
                assert proc.wait(timeout=30) == 0, errors_of(proc)

        starts: dict[tuple[str, int], list[float]] = defaultdict(list)
        for line in log.read_text().splitlines():
            kind, run_id, number, _attempt, at = line.split()
            if kind == "start":
                starts[(run_id, int(number))].append(float(at))
        rerun = 0
        for run in runs:
            assert await run.status() is RunStatus.COMPLETED
            for event in await run.events():
                if isinstance(event, StepCompleted):
                    began = starts[(run.id, event.step)]
                    assert began, f"step {event.step} of {run.id} completed without running"
                    assert all(t < event.at.timestamp() for t in began), "re-run after completion"
                    rerun += len(began) - 1
        # the kills interrupted work that was in flight, so some steps really ran twice
        assert rerun >= 1


@pytest.mark.skipif(
    not __import__("importlib").util.find_spec("worlds.sqlite"), reason="sqlite world not built yet"
)
async def test_sigkilled_workers_on_sqlite(tmp_path: Path) -> None:
    await crash_and_recover(f"sqlite:///{tmp_path}/world.db", tmp_path)
