"""``start_or_resume_hook`` from several OS processes at once: one run, no payload lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import worlds
from tests.apps.cartapp import cart
from tests.system.running import errors_of
from workflow import Worker, find_run, list_runs

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
EACH = 15


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_start_or_resume_hook_from_several_processes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = f"sqlite:///{tmp_path}/world.db"
    total = PROCESSES * EACH
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    async with worlds.open(url) as world:
        await world.migrate()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.apps.cartapp", url, "c-1", *_span(p, total)],
                cwd=ROOT,
                env=env,
                stderr=subprocess.PIPE,
            )
            for p in range(PROCESSES)
        ]
        for proc in procs:
            assert proc.wait(timeout=120) == 0, errors_of(proc)
        holder = await find_run("cart", "c-1", world=world)
        assert holder is not None
        async with Worker(world, [cart]):
            items = await holder.result(timeout=60)
        # every item exactly once, though each was sent twice by racing processes
        assert sorted(item["sku"] for item in items) == list(range(total))
        assert [run.id for run in await list_runs(workflow=cart, world=world)] == [holder.id]


def _span(process: int, total: int) -> list[str]:
    """The command-line arguments FIRST COUNT EXPECTED of client ``process``."""
    return [str(process * EACH), str(EACH), str(total)]
