"""Rate limits across OS processes: two processes start runs of one rate-limited pair
at once while two worker processes come late (after every start, so the runs admitted
first are begun in a burst); from the logs, no window of ``per`` holds more than
``limit`` recorded starts (``RunStarted``, ``started_at``), each the run's admission."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest

import worlds
from tests.system.running import output, spawn
from workflow import RunStatus, get_run
from worlds.types import RunCreated, RunStarted, StepCreated

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 4
PER = 1.0
PER_STARTER = 14
STARTERS = 2
WORKERS = 2
LATE = 2.5
"""Seconds the workers wait after the starters finished: longer than ``PER``, so the
first runs are begun at least a window after their admission."""


def most_in_a_window(times: list[datetime], per: float) -> int:
    """The most of ``times`` any half-open window ``(t - per, t]`` holds."""
    span = timedelta(seconds=per)
    return max((sum(1 for o in times if t - span < o <= t) for t in times), default=0)


async def _collect(procs: list[subprocess.Popen[str]]) -> list[str]:
    out: list[str] = []
    for proc in procs:
        text = await anyio.to_thread.run_sync(output, proc)
        assert proc.returncode == 0, f"a process failed ({proc.returncode})"
        out.append(text)
    return out


async def _contend(url: str, value: str, tmp_path: Path) -> None:
    total = PER_STARTER * STARTERS
    go = tmp_path / f"go-{value}"
    async with worlds.open(url) as world:
        workers = spawn(["tests.apps.rates", "work", url, str(total), value, str(go)], WORKERS)
        try:
            starters = spawn(
                ["tests.apps.rates", "start", url, str(PER_STARTER), value, str(LIMIT), str(PER)],
                STARTERS,
            )
            started = [run_id for text in await _collect(starters) for run_id in json.loads(text)]
            await anyio.sleep(LATE)
            go.touch()
        finally:
            go.touch()
            began = [json.loads(text) for text in await _collect(workers)]
        assert len(set(started)) == total
        assert sum(began) >= total, "the workers began fewer bodies than runs"
        recorded, admitted, begun = [], [], []
        for run_id in started:
            run = get_run(run_id, world=world)
            assert await run.status() is RunStatus.COMPLETED
            events = await run.events()
            created = events[0]
            assert isinstance(created, RunCreated)
            start = next(e for e in events if isinstance(e, RunStarted))
            record = await world.get_run(run_id)
            assert record is not None and record.started_at == start.at
            recorded.append(start.at)
            admitted.append(created.start_at or created.at)
            begun.append(next(e.at for e in events if isinstance(e, StepCreated)))
        assert recorded == admitted, "a recorded start is not its run's admission"
        assert most_in_a_window(recorded, PER) <= LIMIT
        lags = [(b - r).total_seconds() for b, r in zip(begun, recorded, strict=True)]
        assert max(lags) > PER, "no worker came late: the test waited for nothing"


async def test_late_workers_record_starts_within_the_rate_sqlite(tmp_path: Path) -> None:
    await _contend(f"sqlite:///{tmp_path}/world.db", "rate-sqlite", tmp_path)


async def test_late_workers_record_starts_within_the_rate_postgres(
    postgres_world_url: str, tmp_path: Path
) -> None:
    await _contend(postgres_world_url, "rate-postgres", tmp_path)
