"""Room taken and given back in an SQLite world's file, for full-disk tests:
``ballast`` runs (no worker serves them) fill the file, pruning them frees it;
``full_while_bulky_runs`` sets the scene of a step finishing on a full world."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import anyio

from tests.apps.bulky import bulky_flow
from workflow import Run, prune_runs, start, workflow
from worlds.protocol import World

RESULT_SIZE = 200_000
"""Bytes the bulky step returns: about 50 pages, more than a full world has left."""


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


class Scene(NamedTuple):
    """A bulky run whose step just finished, on a file filled past the worker's cap."""

    run: Run[int]
    kept: Run[None]
    filler: list[Run[None]]


async def full_while_bulky_runs(operator: World, path: Path, journal: Path, gate: Path) -> Scene:
    """Start a ``bulky_flow`` run through ``operator``, wait for its step to start
    (a worker capped at 200 pages serves it), start one more run to keep, fill the
    file past 220 pages and open the gate: the step's result no longer fits."""
    run = await start(bulky_flow, str(journal), str(gate), RESULT_SIZE, world=operator)
    with anyio.fail_after(30):
        while not journal.exists():
            await anyio.sleep(0.02)
    kept = await start(ballast, "kept", world=operator)
    filler = await fill(operator, path, 220)
    gate.touch()
    return Scene(run, kept, filler)
