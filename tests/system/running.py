"""What the process tests share: spawning the app processes, reading their output,
and reading back from the logs how many run bodies ran at once."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

from workflow import RunStatus, get_run
from worlds.protocol import World
from worlds.semantics import index_value
from worlds.types import RunStarted, utcnow

__all__ = ["errors_of", "output", "peak_holders", "peak_running", "spawn"]

ROOT = Path(__file__).resolve().parents[2]


def spawn(args: list[str], count: int) -> list[subprocess.Popen[str]]:
    """``count`` processes of ``python -m *args`` in the repository, stdout piped."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", *args]
    return [
        subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]


def output(proc: subprocess.Popen[str]) -> str:
    """What ``proc`` printed, once it exited (within 300 s)."""
    out, _ = proc.communicate(timeout=300)
    return out


def errors_of(proc: subprocess.Popen[bytes]) -> str:
    """What ``proc`` wrote to its piped stderr, decoded whole (an assertion message of
    bytes is shown cut short)."""
    return proc.stderr.read().decode(errors="replace") if proc.stderr else ""


async def peak_holders(world: World, key: str, value: str, since: datetime) -> int:
    """The most holders the pair (``key``, ``value``) had since ``since``, as the world
    recorded it inside each transaction that changed the pair (``World.slot_history``).

    Exact where times from the logs are not: an event is stamped when its
    transaction begins, before it takes the pair's lock, so under load a run that
    entered just after another left can carry the earlier time."""
    history = await world.slot_history(key, since - timedelta(minutes=1), utcnow())
    peaks = [sample.peak_holders for sample in history if sample.ivalue == index_value(value)]
    return max(peaks, default=0)


async def peak_running(world: World, run_ids: list[str]) -> int:
    """The most runs of ``run_ids`` (all completed) that were between their
    ``RunStarted`` and their closing event at one moment, from their logs.

    An upper bound only across processes: each event is stamped when its
    transaction begins, so one that waited for a lock can carry a time from
    before the transaction it waited for (``peak_holders`` is exact)."""
    moments: list[tuple[datetime, int]] = []
    for run_id in run_ids:
        run = get_run(run_id, world=world)
        assert await run.status() is RunStatus.COMPLETED
        events = await run.events()
        opened = next(e.at for e in events if isinstance(e, RunStarted))
        moments += [(opened, 1), (events[-1].at, -1)]
    running = peak = 0
    for _, change in sorted(moments, key=lambda m: (m[0], m[1])):
        running += change
        peak = max(peak, running)
    return peak
