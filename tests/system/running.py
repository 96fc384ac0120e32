"""What the process tests share: spawning the app processes, reading their output,
and reading back from the logs how many run bodies ran at once."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from workflow import RunStatus, get_run
from worlds.protocol import World
from worlds.types import RunStarted

__all__ = ["output", "peak_running", "spawn"]

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


async def peak_running(world: World, run_ids: list[str]) -> int:
    """The most runs of ``run_ids`` (all completed) that were between their
    ``RunStarted`` and their closing event at one moment, from their logs."""
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
