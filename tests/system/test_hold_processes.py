"""``hold()`` across OS processes: several processes run blocks on one pair; the
pair's holders never exceed the limit, sampled throughout, and in the logs no
more blocks than the limit were ever inside at once."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import anyio
import pytest

import worlds
from tests.system.running import output, spawn
from workflow import RunStatus, get_run
from worlds.protocol import World
from worlds.types import SlotAcquired, SlotReleased, SlotRequested

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 2
PER_PROCESS = 12
PROCESSES = 3


def _spawn(url: str, value: str) -> list[subprocess.Popen[str]]:
    return spawn(["tests.apps.holds", url, str(PER_PROCESS), value, str(LIMIT)], PROCESSES)


async def _contend(url: str, value: str) -> None:
    procs = _spawn(url, value)
    samples: list[int] = []
    started: list[str] = []
    async with worlds.open(url) as world:
        try:
            while any(proc.poll() is None for proc in procs):
                rows = await world.list_slots("gpu", value)
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
        await _assert_never_more_blocks_than_the_limit(world, started)
        assert await world.list_slots("gpu", value) == []


async def _assert_never_more_blocks_than_the_limit(world: World, run_ids: list[str]) -> None:
    """From the logs: at no moment were more than LIMIT blocks between their slot
    (taken at once, or promoted) and its release."""
    moments: list[tuple[datetime, int]] = []
    waited = 0
    for run_id in run_ids:
        run = get_run(run_id, world=world)
        assert await run.status() is RunStatus.COMPLETED
        events = await run.events()
        (requested,) = [e for e in events if isinstance(e, SlotRequested)]
        if requested.acquired:
            entered = requested.at
        else:
            waited += 1
            entered = next(e.at for e in events if isinstance(e, SlotAcquired))
        released = next(e.at for e in events if isinstance(e, SlotReleased))
        moments += [(entered, 1), (released, -1)]
    assert waited > 0, "no run waited: the test contended for nothing"
    inside = peak = 0
    for _, change in sorted(moments, key=lambda m: (m[0], m[1])):
        inside += change
        peak = max(peak, inside)
    assert peak <= LIMIT


async def test_processes_holding_one_pair_never_exceed_the_limit_sqlite(tmp_path: Path) -> None:
    await _contend(f"sqlite:///{tmp_path}/world.db", "proc-sqlite")


async def test_processes_holding_one_pair_never_exceed_the_limit_postgres(
    postgres_world_url: str,
) -> None:
    await _contend(postgres_world_url, "proc-postgres")
