"""``wf workers list`` tells the truth about real ``wf worker`` processes: three serve a
world, one is SIGKILLed, and the list shows it dead (its work taken over) while the
two others stay live, then stopped once they shut down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from tests.apps.crashapp import chain
from workflow import get_run, start

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
STEPS = 12
"""Steps of each run's chain (0.15 s each)."""


def spawn_worker(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CRASHAPP_LOG": str(log),
        "PYTHONPATH": str(ROOT),
        "WORKFLOW_BUILD_ID": "build-7",
    }
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.crashapp", "--world", url]
    return subprocess.Popen(
        [*command, "--lease-seconds", "1", "--concurrency", "4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def workers_list(url: str) -> dict[int, dict[str, Any]]:
    """``wf workers list --json``, by worker pid."""
    done = subprocess.run(
        [sys.executable, "-m", "cli", "workers", "list", "--world", url, "--json"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    return {worker["pid"]: worker for worker in json.loads(done.stdout)}


async def until(url: str, what: str, check: Any) -> dict[int, dict[str, Any]]:
    """Poll ``wf workers list`` until ``check(listing)`` holds (60 s at most)."""
    with anyio.move_on_after(60):
        while True:
            listing = await anyio.to_thread.run_sync(workers_list, url)
            if check(listing):
                return listing
            await anyio.sleep(0.2)
    pytest.fail(f"wf workers list never showed {what}: {listing}")


async def test_workers_list_shows_a_sigkilled_worker_dead_and_the_others_live(
    tmp_path: Path,
) -> None:
    url, log = f"sqlite:///{tmp_path}/world.db", tmp_path / "steps.log"
    log.touch()
    async with worlds.open(url) as world:
        # three times as many runs as the workers' 12 slots: each worker's slots stay
        # full while the backlog lasts, so the victim holds work whenever it is killed
        # (with as many runs as slots, a loaded machine let it beat once with none)
        runs = [await start(chain, STEPS, seed, world=world) for seed in range(36)]
    procs = [spawn_worker(url, log) for _ in range(3)]
    pids = {proc.pid for proc in procs}
    try:
        listing = await until(
            url,
            "three live workers, each holding work",
            lambda seen: (
                pids <= set(seen)
                and all(
                    seen[pid]["status"] == "live" and seen[pid]["in_flight"] > 0 for pid in pids
                )
            ),
        )
        assert {listing[pid]["build_id"] for pid in pids} == {"build-7"}
        victim, *survivors = procs
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        listing = await until(
            url,
            "the killed worker dead",
            lambda seen: seen[victim.pid]["status"] == "dead",
        )
        assert listing[victim.pid]["in_flight"] > 0, "it died holding work"
        assert [listing[proc.pid]["status"] for proc in survivors] == ["live", "live"]
        async with worlds.open(url) as world:
            for seed, run in enumerate(runs):
                again = get_run(run.id, world=world)
                assert await again.result(timeout=120) == seed + sum(range(STEPS))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)
    listing = await anyio.to_thread.run_sync(workers_list, url)
    assert listing[victim.pid]["status"] == "dead"
    assert [listing[proc.pid]["status"] for proc in survivors] == ["stopped", "stopped"]
