"""Room taken and given back in an SQLite world's file, for full-disk tests:
``ballast`` runs (no worker serves them) fill the file, pruning them frees it."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from workflow import Run, prune_runs, start, workflow
from worlds.protocol import World


@workflow
async def ballast(blob: str) -> None:
    """Never run (no worker serves it): its runs take room, until pruned."""


async def fill(world: World, path: Path, pages: int) -> list[Run[None]]:
    """Start ``ballast`` runs through ``world`` until the file holds ``pages`` pages."""
    runs: list[Run[None]] = []
    while True:
        with sqlite3.connect(path) as db:
            if db.execute("PRAGMA page_count").fetchone()[0] >= pages:
                return runs
        runs.append(await start(ballast, "b" * 40_000, world=world))


async def free(runs: list[Run[None]], world: World) -> None:
    """Cancel and prune ``runs``: their pages go back to the file's free list."""
    for run in runs:
        await run.cancel()
    await prune_runs(closed_before=datetime.now(UTC), limit=len(runs) + 10, world=world)
