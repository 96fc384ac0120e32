"""Pinned deployments across processes (issue 31, RFC 0025): two ``wf worker``
processes of builds v1 and v2 on one world (an SQLite file, PostgreSQL).

Runs started while only v1 served are executed by v1 alone (every step's
``StepCompleted`` names the build that ran it); runs started once v2 serves run on
v2; ``pin="latest"`` runs move to v2 at their next task; ``wf deployments list``
shows both builds; ``wf deployments drain v1`` says "not drained" while a run
pinned to v1 is open and exits 0 once none is; a pinned run whose build has no
worker waits ("waiting for a worker of build v1") and is not leased by v2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from tests.apps.deployapp import moving, pinned
from tests.conftest import world_url
from workflow import Run, RunStatus, resume_hook, start
from workflow.deployments import get_deployment
from worlds.protocol import World
from worlds.types import HookCreated, StepCompleted, StepStarted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("WORKFLOW_BUILD_ID", None)
PATIENCE = 120.0
"""How long the test waits for anything to happen: a hang detector on a loaded machine."""


def _worker(url: str, build: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.deployapp", "--world", url]
    command += ["--build-id", build, "--lease-seconds", "5", "--grace", "5"]
    return subprocess.Popen(
        command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def _wf(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli", *args, "--world", url]
    return subprocess.run(
        command, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=PATIENCE
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=PATIENCE) == 0


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=PATIENCE)


async def _until_hooked(runs: list[Run[Any]]) -> None:
    """Wait until every run of ``runs`` waits on its hook (its first step done)."""
    with anyio.fail_after(PATIENCE):
        for run in runs:
            while not any(isinstance(event, HookCreated) for event in await run.events()):
                await anyio.sleep(0.1)


async def _live(world: World, build: str) -> None:
    """Wait until a worker of ``build`` is live and its build is the newest."""
    with anyio.fail_after(PATIENCE):
        while True:
            record = await get_deployment(build, world=world)
            if record is not None and record.live_workers and record.newest:
                return
            await anyio.sleep(0.1)


async def _builds(run: Run[Any]) -> list[str | None]:
    """The build that completed each of ``run``'s steps, in order."""
    return [event.build_id for event in await run.events() if isinstance(event, StepCompleted)]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_runs_stay_on_their_build_and_v1_drains(
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = world_url(kind, tmp_path)
    async with worlds.open(url) as world:
        processes.append(_worker(url, "v1"))
        await _live(world, "v1")
        old = [await start(pinned, f"old-{n}", world=world) for n in range(3)]
        latest = [await start(moving, f"latest-{n}", world=world) for n in range(2)]
        await _until_hooked(old + latest)

        processes.append(_worker(url, "v2"))
        await _live(world, "v2")
        new = [await start(pinned, f"new-{n}", world=world) for n in range(3)]
        await _until_hooked(new)

        listed = _wf(url, "deployments", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        table = {row["build_id"]: row for row in json.loads(listed.stdout)}
        assert (table["v1"]["open_runs"], table["v1"]["live_workers"]) == (5, 1)
        assert (table["v2"]["open_runs"], table["v2"]["live_workers"]) == (3, 1)
        assert table["v2"]["newest"] and not table["v1"]["newest"]
        assert table["v1"]["pinned_runs"] == 3, "the latest runs do not hold v1"
        assert sorted(table["v1"]["workflows"]) == ["moving", "pinned"]

        for n in range(1, 3):
            await resume_hook(f"old-{n}", "go", world=world)
        for n in range(2):
            await resume_hook(f"latest-{n}", "go", world=world)
        for n in range(3):
            await resume_hook(f"new-{n}", "go", world=world)
        with anyio.fail_after(PATIENCE):
            for run in old[1:] + latest + new:
                assert await run.result() == 3

        for run in old[1:]:
            assert await _builds(run) == ["v1", "v1"], "a run started on v1 ran elsewhere"
        for run in latest:
            assert await _builds(run) == ["v1", "v2"], "a latest run did not move to v2"
        for run in new:
            assert await _builds(run) == ["v2", "v2"], "a run started after v2 ran on v1"

        busy = _wf(url, "deployments", "drain", "v1")
        assert busy.returncode == 1, busy.stdout + busy.stderr
        assert "1 open run(s) still need it" in busy.stdout

        # v1 goes away while a run pinned to it is open: the run waits for v1, and v2
        # (polling all along) never leases it
        _stop(processes[0])
        await resume_hook("old-0", "go", world=world)
        with anyio.fail_after(PATIENCE):
            while (
                "waiting for a worker of build v1"
                not in (shown := _wf(url, "runs", "show", old[0].id)).stdout
            ):
                await anyio.sleep(0.2)
        assert shown.returncode == 0, shown.stderr
        before = len(await old[0].events())
        await anyio.sleep(2.0)  # v2 polls every 0.25 s meanwhile
        events = await old[0].events()
        assert len(events) == before and await old[0].status() == RunStatus.RUNNING
        assert not [e for e in events[before - 1 :] if isinstance(e, StepStarted)]

        processes.append(_worker(url, "v1"))  # v1 back: the run goes on there
        with anyio.fail_after(PATIENCE):
            assert await old[0].result() == 3
        assert await _builds(old[0]) == ["v1", "v1"]

        drained = _wf(url, "deployments", "drain", "v1", "--wait", "--timeout", "60")
        assert drained.returncode == 0, drained.stdout + drained.stderr
        assert "is drained" in drained.stdout
        listed = _wf(url, "deployments", "list")
        assert listed.returncode == 0 and "v1" in listed.stdout and "v2" in listed.stdout
        for proc in processes[1:]:
            _stop(proc)
