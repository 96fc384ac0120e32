"""``wf runs cancel|retry|prune --query``: count, confirm (or --yes), --dry-run, the
count line; the single-run forms unchanged; ``wf world retention``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

import worlds
from cli import app
from tests.apps.bulkapp import parked
from tests.cli.test_cli import ROOT, Result, wf
from workflow import RunStatus, list_runs, start

pytestmark = pytest.mark.anyio


def wf_input(url: str, text: str, *args: str) -> Result:
    """``wf ARGS --world URL`` in this process, ``text`` on its stdin."""
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        done = CliRunner().invoke(
            app, [*args, "--world", url], input=text, env={"COLUMNS": "200", "WORKFLOW_WORLD": None}
        )
    finally:
        os.chdir(before)
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    return Result(done.exit_code, done.stdout, done.stderr)


def _world(tmp_path: Path, count: int) -> tuple[str, list[str]]:
    url = f"sqlite:///{tmp_path / 'w.db'}"

    async def populate() -> list[str]:
        async with worlds.open(url) as world:
            ids = []
            for n in range(count):
                batch = "a" if n % 3 else "b"
                ids.append((await start(parked, n, attributes={"batch": batch}, world=world)).id)
            return ids

    return url, anyio.run(populate)


def _statuses(url: str) -> dict[str, RunStatus]:
    async def read() -> dict[str, RunStatus]:
        async with worlds.open(url) as world:
            page = await list_runs(workflow="parked", limit=1000, world=world)
            return {run.id: run.record.status for run in page if run.record is not None}

    return anyio.run(read)


def test_bulk_cancel_asks_first_and_a_no_changes_nothing(tmp_path: Path) -> None:
    url, _ = _world(tmp_path, 30)  # 20 with batch=a
    refused = wf_input(url, "n\n", "runs", "cancel", "--query", "batch = 'a'")
    assert refused.code != 0
    assert "20 run(s) match" in refused.err and "nothing was cancelled" in refused.err
    assert set(_statuses(url).values()) == {RunStatus.PENDING}
    done = wf_input(url, "y\n", "runs", "cancel", "--query", "batch = 'a'", "--reason", "bad")
    assert done.code == 0, done.err
    assert "cancelled 20 of 20; 0 failed" in done.out
    statuses = _statuses(url)
    assert sum(s is RunStatus.CANCELLED for s in statuses.values()) == 20
    assert sum(s is RunStatus.PENDING for s in statuses.values()) == 10


def test_dry_run_lists_the_matching_runs_and_changes_nothing(tmp_path: Path) -> None:
    url, ids = _world(tmp_path, 9)
    shown = wf_input(url, "", "runs", "retry", "--attr", "batch=b", "--dry-run")
    assert shown.code == 0, shown.err
    b_ids = [run_id for n, run_id in enumerate(ids) if n % 3 == 0]
    assert all(run_id in shown.out for run_id in b_ids)
    assert not any(run_id in shown.out for n, run_id in enumerate(ids) if n % 3)
    assert "3 run(s) match; dry run: nothing was retried" in shown.out
    pruned = wf_input(url, "", "runs", "prune", "--query", "batch = 'b'", "--dry-run")
    assert "0 run(s) match" in pruned.out  # prune acts on closed runs only
    assert set(_statuses(url).values()) == {RunStatus.PENDING}


def test_yes_skips_the_question_and_the_count_line_counts_failures(tmp_path: Path) -> None:
    url, _ = _world(tmp_path, 12)
    assert wf_input(url, "", "runs", "cancel", "-a", "batch=b", "--yes", "--now").code == 0
    retried = wf_input(url, "", "runs", "retry", "--query", "batch IN ('a', 'b')", "--yes")
    assert retried.code == 0, retried.err
    assert "retried 4 of 12; 8 failed" in retried.out
    assert "only a failed or cancelled run is retried" in retried.err
    assert wf_input(url, "", "runs", "cancel", "-a", "batch=b", "--yes", "--now").code == 0
    pruned = wf_input(url, "", "runs", "prune", "-a", "batch=b", "--yes", "--json")
    assert pruned.code == 0, pruned.err
    document = Result(0, pruned.out, "").json()
    assert (document["matched"], document["done"], document["failed"]) == (4, 4, 0)
    assert len(_statuses(url)) == 8


def test_the_single_run_forms_keep_working(tmp_path: Path) -> None:
    url, ids = _world(tmp_path, 2)
    cancelled = wf(url, "runs", "cancel", ids[0], "--now")
    assert cancelled.code == 0 and f"cancelled run {ids[0]}" in cancelled.out
    retried = wf(url, "runs", "retry", ids[0])
    assert retried.code == 0 and f"reopened run {ids[0]}" in retried.out
    assert wf(url, "runs", "prune", "--before", "1d").code == 0
    both = wf(url, "runs", "cancel", ids[1], "--query", "batch = 'a'")
    assert both.code == 2 and "not both" in both.err
    neither = wf(url, "runs", "retry")
    assert neither.code == 2 and "--query" in neither.err


def test_bulk_cancel_through_the_process_boundary(tmp_path: Path) -> None:
    url, _ = _world(tmp_path, 6)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("WORKFLOW_WORLD", None)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "runs", "cancel", "-q", "batch = 'a'", "--world", url],
        cwd=ROOT,
        env=env,
        input="y\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "4 run(s) match" in done.stderr
    assert done.stdout.strip().endswith("cancelled 4 of 4; 0 failed")
    malformed = wf(url, "runs", "cancel", "--query", "batch = ", "--yes")
    assert malformed.code == 2 and "malformed query" in malformed.err


def test_world_retention_sets_and_prints_the_windows(tmp_path: Path) -> None:
    url, _ = _world(tmp_path, 1)
    empty = wf(url, "world", "retention")
    assert empty.code == 0 and "no retention" in empty.out
    assert wf(url, "world", "retention", "completed=7d", "failed=30d").out.split() == [
        "completed=7d",
        "failed=30d",
    ]
    assert wf(url, "world", "retention", "failed=none", "cancelled=12h").code == 0
    assert wf(url, "world", "retention", "--json").json() == {
        "completed": "7d",
        "cancelled": "12h",
    }
    bad = wf(url, "world", "retention", "running=1d")
    assert bad.code == 2 and "open" in bad.err
    assert wf(url, "world", "retention", "completed=soon").code == 2
