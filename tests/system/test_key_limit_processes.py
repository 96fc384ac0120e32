"""Key limits across OS processes: four processes start runs of five values of one
key (each pair limited to 3) under a key limit of 4 and work on them; sampled
throughout, the key's slots held never exceed 4, and in the logs no more bodies
than that ever ran at once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

import worlds
from tests.system.running import output, peak_running, spawn
from workflow import get_key_limit, set_key_limit

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

KEY_LIMIT = 4
PAIR_LIMIT = 3
VALUES = 5
PER_PROCESS = 15
PROCESSES = 4


def _spawn(url: str, value: str) -> list[subprocess.Popen[str]]:
    return spawn(
        ["tests.apps.slots", url, str(PER_PROCESS), value, str(PAIR_LIMIT), str(VALUES)], PROCESSES
    )


async def _contend(url: str, value: str) -> None:
    async with worlds.open(url) as world:
        await set_key_limit("tenant", KEY_LIMIT, world=world)
        procs = _spawn(url, value)
        held: list[int] = []
        started: list[str] = []
        try:
            while any(proc.poll() is None for proc in procs):
                found = await get_key_limit("tenant", world=world)
                assert found is not None
                held.append(found.held)  # one statement: a consistent count of the key
                await anyio.sleep(0.01)
        finally:
            for proc in procs:
                out = await anyio.to_thread.run_sync(output, proc)
                assert proc.returncode == 0
                started += json.loads(out)
        assert len(held) > 10, "the processes finished before the key could be sampled"
        assert max(held) <= KEY_LIMIT, held
        assert max(held) == KEY_LIMIT, "the key never filled: the test contended for nothing"
        assert len(set(started)) == PER_PROCESS * PROCESSES
        assert await peak_running(world, started) <= KEY_LIMIT
        found = await get_key_limit("tenant", world=world)
        assert found is not None and found.held == 0


async def test_processes_under_one_key_limit_never_exceed_it_sqlite(tmp_path: Path) -> None:
    await _contend(f"sqlite:///{tmp_path}/world.db", "key-sqlite")


async def test_processes_under_one_key_limit_never_exceed_it_postgres(
    postgres_world_url: str,
) -> None:
    await _contend(postgres_world_url, "key-postgres")
