"""What the process tests read back from the logs: how many run bodies ran at once."""

from __future__ import annotations

from datetime import datetime

from workflow import RunStatus, get_run
from worlds.protocol import World
from worlds.types import RunStarted

__all__ = ["peak_running"]


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
