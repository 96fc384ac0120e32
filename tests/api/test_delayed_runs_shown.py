"""Issue 24: a pending run made to wait for a time says when it starts and why, in the
view objects ``wf runs show`` and the UI print (and so in ``wf runs show`` itself)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

import worlds
from tests.cli.test_cli_errors import wf
from workflow import start, workflow
from workflow.policies import start_or_debounce
from workflow.views import gather_details
from worlds.protocol import World


@workflow(name="shown-later")
async def later(x: int) -> int:
    return x


@pytest.mark.anyio
async def test_a_delayed_run_says_when_it_starts(world: World) -> None:
    run = await start(later, 1, delay=3600, world=world)
    details = await gather_details(run)
    assert details.start_reason == "delayed"
    assert details.starts_at is not None
    ahead = details.starts_at - details.record.created_at
    assert timedelta(minutes=59) < ahead <= timedelta(minutes=60, seconds=1)
    note = details.start_note()
    assert note is not None and "starts at" in note and "delay" in note
    document = details.to_json()
    assert document["start_reason"] == "delayed"
    assert document["starts_at"] == details.starts_at.isoformat()


@pytest.mark.anyio
async def test_a_debounced_run_says_so_and_each_debounce_moves_it(world: World) -> None:
    first = await start_or_debounce(
        later, 1, key="doc", value="d-1", delay=600, max_delay=7200, world=world
    )
    before = await gather_details(first)
    assert before.start_reason == "debounced" and before.starts_at is not None
    again = await start_or_debounce(
        later, 2, key="doc", value="d-1", delay=3600, max_delay=7200, world=world
    )
    assert again.id == first.id
    after = await gather_details(first)
    assert after.start_reason == "debounced" and after.starts_at is not None
    assert after.starts_at - before.starts_at > timedelta(minutes=40)
    assert "debounced" in (after.start_note() or "")


@pytest.mark.anyio
async def test_a_run_that_waits_for_no_time_has_no_start_note(world: World) -> None:
    details = await gather_details(await start(later, 1, world=world))
    assert details.starts_at is None and details.start_note() is None
    assert details.to_json()["starts_at"] is None


def test_wf_runs_show_says_when_a_delayed_run_starts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/w.db"
    got, output = wf(
        "start",
        "examples.quickstart:checkout",
        '"o-1"',
        "1",
        "2",
        "--delay",
        "3600",
        "--world",
        url,
    )
    assert got == 0, output
    run_id = output.strip().splitlines()[-1]
    got, output = wf("runs", "show", run_id, "--world", url)
    assert got == 0, output
    assert "pending" in output and "starts at" in output and "delayed" in output
    got, output = wf("runs", "show", run_id, "--json", "--world", url)
    document = json.loads(output)
    assert document["start_reason"] == "delayed" and document["starts_at"]

    async def debounced() -> str:
        from examples.quickstart import checkout

        async with worlds.open(url) as world:
            run = await start_or_debounce(
                checkout,
                "o-2",
                1,
                2,
                key="doc",
                value="x",
                delay=60,
                max_delay=600,
                world=world,
            )
            return run.id

    got, output = wf("runs", "show", anyio.run(debounced), "--world", url)
    assert got == 0 and "debounced" in output, output
