"""``wf schedules list`` in an 80-column terminal prints every id and fire time whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.schedapp import scheduled_tick
from workflow.schedules import Overlap, create_schedule

ROOT = Path(__file__).resolve().parents[2]


def wf(url: str, *args: str) -> str:
    """``wf ARGS --world URL`` in a terminal 80 columns wide."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80"}
    env.pop("WORKFLOW_WORLD", None)
    done = subprocess.run(
        [sys.executable, "-m", "cli", *args, "--world", url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.parametrize(
    "ids",
    [
        ("daily-report", "heartbeat"),  # the table fits once its other columns fold
        ("nightly-warehouse-reconciliation-eu-west-1", "heartbeat"),  # it cannot: records
    ],
)
def test_ids_and_fire_times_are_never_cut_at_80_columns(
    tmp_path: Path, ids: tuple[str, str]
) -> None:
    url = f"sqlite:///{tmp_path}/world.db"

    async def setup() -> None:
        async with worlds.open(url) as world:
            await create_schedule(
                scheduled_tick,
                "night",
                id=ids[0],
                cron="0 3 * * *",
                timezone="Europe/Paris",
                overlap=Overlap.CANCEL_OTHER,
                world=world,
            )
            await create_schedule(
                scheduled_tick, "beat", id=ids[1], every=timedelta(seconds=10), world=world
            )

    anyio.run(setup)
    listed = json.loads(wf(url, "schedules", "list", "--json"))
    out = wf(url, "schedules", "list")
    assert "…" not in out, out
    assert all(len(line) <= 80 for line in out.splitlines()), out
    words = out.split()
    for schedule in listed:
        assert schedule["id"] in words, out
        assert schedule["next_fire_times"][0].replace("Z", "+00:00") in words, out
