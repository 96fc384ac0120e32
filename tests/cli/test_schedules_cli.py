"""``wf schedules``: list, show, pause, unpause, trigger, backfill and delete from a shell."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

import worlds
from cli.main import app
from tests.apps.schedapp import scheduled_tick
from workflow import Worker, get_run
from workflow.schedules import Overlap, create_schedule

ROOT = Path(__file__).resolve().parents[2]


def wf(*args: str) -> tuple[int, str]:
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, list(args), env={"WORKFLOW_WORLD": None})
    finally:
        os.chdir(before)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(result.output) from result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def url(tmp_path: Path) -> str:
    """An SQLite world holding two schedules: ``nightly`` (cron) and ``often`` (every 10 s)."""
    url = f"sqlite:///{tmp_path}/world.db"

    async def setup() -> None:
        async with worlds.open(url) as world:
            await create_schedule(
                scheduled_tick,
                "night",
                id="nightly",
                cron="0 3 * * *",
                timezone="Europe/Paris",
                key="report",
                value="daily",
                attributes={"team": "data"},
                world=world,
            )
            await create_schedule(
                scheduled_tick,
                "often",
                id="often",
                every=timedelta(seconds=10),
                overlap=Overlap.ALLOW_ALL,
                world=world,
            )

    anyio.run(setup)
    return url


def test_list_shows_every_schedule_as_a_table_and_json(url: str) -> None:
    code, out = wf("schedules", "list", "--world", url)
    assert code == 0, out
    assert "nightly" in out and "often" in out and "every 10s" in out
    code, out = wf("schedules", "list", "--world", url, "--json")
    assert code == 0, out
    listed = json.loads(out)
    assert [s["id"] for s in listed] == ["nightly", "often"]
    assert listed[0]["cron"] == "0 3 * * *" and listed[0]["timezone"] == "Europe/Paris"
    assert listed[1]["every_seconds"] == 10.0 and listed[1]["overlap"] == "allow_all"


def test_show_gives_the_definition_and_next_fires(url: str) -> None:
    code, out = wf("schedules", "show", "nightly", "--world", url)
    assert code == 0, out
    assert "report=daily" in out and "team=data" in out and "Europe/Paris" in out
    code, out = wf("schedules", "show", "nightly", "--world", url, "--json")
    shown = json.loads(out)
    assert (shown["key"], shown["value"], shown["paused"]) == ("report", "daily", False)
    assert len(shown["next_fire_times"]) == 5 and shown["recent_run_ids"] == []


def test_pause_and_unpause_with_a_note(url: str) -> None:
    code, out = wf("schedules", "pause", "often", "--note", "maintenance", "--world", url)
    assert code == 0 and "paused schedule often" in out
    shown = json.loads(wf("schedules", "show", "often", "--world", url, "--json")[1])
    assert shown["paused"] is True and shown["note"] == "maintenance"
    assert "paused" in wf("schedules", "list", "--world", url)[1]
    code, out = wf("schedules", "unpause", "often", "--world", url)
    assert code == 0 and "unpaused schedule often" in out
    shown = json.loads(wf("schedules", "show", "often", "--world", url, "--json")[1])
    assert shown["paused"] is False and shown["note"] is None


def test_trigger_follows_the_overlap_rule(url: str) -> None:
    code, out = wf("schedules", "trigger", "nightly", "--world", url)
    assert code == 0 and "started run" in out, out
    run_id = out.split()[-1]
    # no worker runs: the first run is open, so SKIP refuses the next fire
    code, out = wf("schedules", "trigger", "nightly", "--world", url)
    assert code == 0 and "overlap rule" in out
    code, out = wf("runs", "list", "--attr", "$schedule=nightly", "--world", url, "--json")
    assert [run["id"] for run in json.loads(out)["runs"]] == [run_id]
    shown = json.loads(wf("schedules", "show", "nightly", "--world", url, "--json")[1])
    assert shown["recent_run_ids"] == [run_id]


def test_backfill_starts_each_fire_time_once(url: str) -> None:
    args = ("--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T00:00:30Z")
    code, out = wf("schedules", "backfill", "often", *args, "--world", url, "--json")
    assert code == 0, out
    first = json.loads(out)
    assert len(first) == 3
    code, out = wf("schedules", "backfill", "often", *args, "--world", url, "--json")
    assert json.loads(out) == first
    code, out = wf("runs", "list", "--attr", "$schedule=often", "--world", url, "--json")
    assert sorted(run["id"] for run in json.loads(out)["runs"]) == sorted(first)
    nightly = ("--start", "2026-01-01T00:00:00Z", "--end", "2026-01-04T00:00:00Z", "--json")
    code, out = wf("schedules", "backfill", "nightly", *nightly, "--world", url)
    assert code == 0 and len(json.loads(out)) == 3  # a SKIP schedule, yet every fire time
    later = ("--start", "2026-02-01T00:00:00Z", "--end", "2026-02-04T00:00:00Z")
    code, out = wf("schedules", "backfill", "nightly", *later, "--overlap", "skip", "--world", url)
    assert code == 0 and "1 fire(s) have runs" in out, out  # the first run stays open
    code, out = wf(
        "schedules", "backfill", "often", "--start", "now", "--end", "1h", "--world", url
    )
    assert code == 2 and "start < end" in out


def test_delete_and_errors(url: str) -> None:
    code, out = wf("schedules", "delete", "often", "--world", url)
    assert code == 0 and "deleted schedule often" in out
    assert [s["id"] for s in json.loads(wf("schedules", "list", "--world", url, "--json")[1])] == [
        "nightly"
    ]
    for command in ("show", "pause", "unpause", "trigger", "delete"):
        code, out = wf("schedules", command, "often", "--world", url)
        assert code == 1 and "no schedule 'often'" in out, (command, out)
    code, out = wf("schedules", "show", "bad id", "--world", url)
    assert code == 2 and "schedule id" in out


def test_show_names_the_last_completed_run_and_its_result(url: str) -> None:
    shown = json.loads(wf("schedules", "show", "often", "--world", url, "--json")[1])
    assert shown["last_completed_run_id"] is None and shown["last_result"] is None
    # paused, so the worker below fires nothing of its own that could complete last
    # (it fires every 10 s; a slow machine's worker crossed such an instant)
    assert wf("schedules", "pause", "often", "--world", url)[0] == 0
    code, out = wf("schedules", "trigger", "often", "--world", url)
    assert code == 0 and "started run" in out, out
    run_id = out.split()[-1]

    async def finish() -> None:
        async with worlds.open(url) as world, Worker(world, [scheduled_tick]):
            assert await get_run(run_id, world=world).result(timeout=60) == "often"

    anyio.run(finish)
    shown = json.loads(wf("schedules", "show", "often", "--world", url, "--json")[1])
    assert shown["last_completed_run_id"] == run_id and shown["last_result"] == "often"
    code, out = wf("schedules", "show", "often", "--world", url)
    assert code == 0 and "last result" in out and '"often"' in out and run_id in out
