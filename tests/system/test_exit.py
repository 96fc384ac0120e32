"""A process that opens a world and never closes it still exits (issue 10, item 1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import world_url

ROOT = Path(__file__).resolve().parents[2]


EXIT_WITHIN = 120
"""Seconds a script gets to finish and exit: a hang detector (a script that hangs never
exits). 20 s was overrun by a script that had printed its result, on two cores under a load
average of 30."""


@pytest.mark.parametrize("how", ["explicit", "default"])
def test_a_script_that_never_closes_its_world_exits(
    world_kind: str, how: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if world_kind == "postgres":
        url = str(request.getfixturevalue("postgres_world_url"))
    else:
        url = world_url(world_kind, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKFLOW_WORLD": url}
    argument = url if how == "explicit" else "default"
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "tests.apps.forgetful", argument],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=EXIT_WITHIN,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the process did not exit; it printed {hung.stdout!r}")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "done 42\n"


def test_the_implicit_default_world_does_not_keep_the_process_alive(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WORKFLOW_WORLD"}
    env["PYTHONPATH"] = str(ROOT)
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "tests.apps.forgetful", "default"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=EXIT_WITHIN,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"the process did not exit; it printed {hung.stdout!r}")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout == "done 42\n"
    assert (tmp_path / ".workflow" / "world.db").exists()
