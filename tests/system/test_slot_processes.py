"""Limited pairs across OS processes: several processes start into one full pair
and work on it; the pair's holders never exceed the limit, sampled throughout
and as the world recorded them inside every transaction that changed the pair
(``peak_holders``: the runs' event times are stamped before the pair's lock)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

import worlds
from tests.system.running import output, peak_holders, spawn
from worlds.types import utcnow

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 3
PER_PROCESS = 15
PROCESSES = 4


def _spawn(url: str, value: str) -> list[subprocess.Popen[str]]:
    return spawn(["tests.apps.slots", url, str(PER_PROCESS), value, str(LIMIT)], PROCESSES)


async def _contend(url: str, value: str) -> None:
    began = utcnow()
    procs = _spawn(url, value)
    samples: list[int] = []
    started: list[str] = []
    async with worlds.open(url) as world:
        try:
            while any(proc.poll() is None for proc in procs):
                rows = await world.list_slots("tenant", value)
                samples.append(sum(row.holding for row in rows))
                await anyio.sleep(0.01)
        finally:
            for proc in procs:
                out = await anyio.to_thread.run_sync(output, proc)
                assert proc.returncode == 0
                started += json.loads(out)
        assert len(samples) > 10, "the processes finished before the pair could be sampled"
        assert max(samples) <= LIMIT, samples
        assert max(samples) == LIMIT, "the pair never filled: the test contended for nothing"
        assert len(set(started)) == PER_PROCESS * PROCESSES
        assert await peak_holders(world, "tenant", value, began) == LIMIT
        assert await world.list_slots("tenant", value) == []


async def test_processes_starting_into_one_pair_never_exceed_the_limit_sqlite(
    tmp_path: Path,
) -> None:
    await _contend(f"sqlite:///{tmp_path}/world.db", "proc-sqlite")


async def test_processes_starting_into_one_pair_never_exceed_the_limit_postgres(
    postgres_world_url: str,
) -> None:
    await _contend(postgres_world_url, "proc-postgres")
