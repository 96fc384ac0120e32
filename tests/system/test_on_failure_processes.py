"""``on_failure`` across worker processes killed with SIGKILL around the failures:
every failed run gets exactly one handler run, which completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.failapp import doomed
from tests.system.running import errors_of
from workflow import RunFailedError, RunStatus, get_run, start
from worlds.query import AttrRef, Compare, RunQuery
from worlds.semantics import ON_FAILURE_OF_KEY, handler_run_id

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _spawn(url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FAILAPP_LOG": str(log), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.failapp", "--world", url]
    return subprocess.Popen(
        [*command, "--lease-seconds", "1", "--concurrency", "8"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def _fail_with_kills(url: str, tmp_path: Path) -> None:
    log = tmp_path / "pages.log"
    log.touch()
    world = worlds.open(url)
    async with world:
        runs = [await start(doomed, 3, tag, world=world) for tag in range(16)]
        for _ in range(3):  # kill both workers while runs are failing and handlers starting
            procs = [_spawn(url, log) for _ in range(2)]
            with anyio.fail_after(120):
                while not any([(await r.status()).is_closed for r in runs]):
                    await anyio.sleep(0.05)
            await anyio.sleep(0.3)
            for proc in procs:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        final = [_spawn(url, log) for _ in range(2)]
        try:
            # SIGTERM is the worker's to handle only once it listens for it: under
            # load every run may be closed already, so wait for both to register
            await _registered(world, final)
            for tag, run in enumerate(runs):
                with pytest.raises(RunFailedError, match=f"doomed {tag}"):
                    await run.result(timeout=120)
                handler = get_run(handler_run_id(run.id), world=world)
                assert await handler.result(timeout=120) == f"{run.id}: doomed {tag}"
        finally:
            for proc in final:
                proc.send_signal(signal.SIGTERM)
            for proc in final:
                assert proc.wait(timeout=60) == 0, errors_of(proc)
        for run in runs:
            where = Compare(AttrRef(ON_FAILURE_OF_KEY), "=", run.id)
            handlers = (await world.list_runs(RunQuery(where=where))).runs
            assert [h.id for h in handlers] == [handler_run_id(run.id)]
            assert handlers[0].status is RunStatus.COMPLETED
    paged = {line.split()[1] for line in log.read_text().splitlines()}
    assert paged == {run.id for run in runs}


async def _registered(world: worlds.World, procs: list[subprocess.Popen[bytes]]) -> None:
    """Wait until every process in ``procs`` is a registered worker of ``world``."""
    pids = {proc.pid for proc in procs}
    with anyio.fail_after(120):
        while not pids <= {w.pid for w in await world.list_workers()}:
            assert all(proc.poll() is None for proc in procs), "a worker exited while starting"
            await anyio.sleep(0.05)


async def test_one_handler_per_failed_run_through_sigkills_on_sqlite(tmp_path: Path) -> None:
    await _fail_with_kills(f"sqlite:///{tmp_path}/world.db", tmp_path)


async def test_one_handler_per_failed_run_through_sigkills_on_postgres(
    tmp_path: Path, postgres_world_url: str
) -> None:
    await _fail_with_kills(postgres_world_url, tmp_path)
