"""``wf schedules list`` in an 80-column terminal prints every id and fire time whole."""

from __future__ import annotations

import json

import anyio
import pytest

import worlds
from tests.apps.schedapp import scheduled_tick
from tests.cli.test_cli_docs import ROOT, wf
from tests.cli.test_schedules_cli import url
from workflow.schedules import Overlap, create_schedule

__all__ = ["url"]


@pytest.mark.parametrize(
    "long_id",
    [
        None,  # "nightly" and "often": the table fits once its other columns fold
        "nightly-warehouse-reconciliation-eu-west-1",  # it cannot: one block each
    ],
)
def test_ids_and_fire_times_are_never_cut_at_80_columns(url: str, long_id: str | None) -> None:
    async def add(long_id: str) -> None:
        async with worlds.open(url) as world:
            await create_schedule(
                scheduled_tick,
                "x",
                id=long_id,
                cron="0 4 * * *",
                timezone="Asia/Kolkata",
                overlap=Overlap.CANCEL_OTHER,
                world=world,
            )

    if long_id is not None:
        anyio.run(add, long_id)
    code, out = wf("wf schedules list --json", ROOT, columns=80, world=url)
    assert code == 0, out
    listed = json.loads("\n".join(out))
    code, lines = wf("wf schedules list", ROOT, columns=80, world=url)
    assert code == 0, lines
    shown = "\n".join(lines)
    assert "…" not in shown, shown
    assert all(len(line) <= 80 for line in lines), shown
    words = shown.split()
    for schedule in listed:
        assert schedule["id"] in words, shown
        assert schedule["next_fire_times"][0].replace("Z", "+00:00") in words, shown
