"""Issue 24: a MODULE argument (``wf worker``, ``wf start MODULE:WORKFLOW``, ``--codec``)
that is a path loads that file, and a bare name the standard library owns says so."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import worlds
from cli.main import app
from tests.cli.test_cli_errors import error_line, wf
from workflow import get_run

ROOT = Path(__file__).resolve().parents[2]

APP = """
from workflow import step, workflow


@step
async def double(n: int) -> int:
    return 2 * n


@workflow(name="shadowing-flow")
async def flow(n: int) -> int:
    return await double(n)
"""


@pytest.fixture
def shadowing(tmp_path: Path) -> Path:
    """A project whose workflow files are called like standard-library modules."""
    for name in ("json", "queue"):
        (tmp_path / f"{name}.py").write_text(APP)
    return tmp_path


@pytest.mark.parametrize(
    "args",
    [
        ["worker", "queue"],
        ["worker", "json"],
        ["start", "json:flow", "1"],
        ["worker", "examples.quickstart", "--codec", "queue:Codec"],
    ],
)
def test_a_bare_name_the_standard_library_owns_is_refused(shadowing: Path, args: list[str]) -> None:
    url = f"sqlite:///{shadowing}/w.db"
    got, output = wf(*args, "--world", url, cwd=shadowing)
    assert got == 2, output
    line = error_line(output)
    assert "standard library" in line and ".py" in line, line
    assert not (shadowing / "w.db").exists()


def test_a_bare_stdlib_name_without_a_local_file_says_so(tmp_path: Path) -> None:
    got, output = wf("worker", "json", "--world", f"sqlite:///{tmp_path}/w.db", cwd=tmp_path)
    assert got == 2 and "standard library" in error_line(output)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["./json.py", "queue.py"])
def test_a_path_loads_that_file_not_the_stdlib_module(shadowing: Path, path: str) -> None:
    url = f"sqlite:///{shadowing}/w.db"
    got, output = wf("start", f"{path}:flow", "21", "--world", url, cwd=shadowing)
    assert got == 0, output
    run_id = output.strip().splitlines()[-1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # the console script, as a user runs it: ``python -m`` would put the project folder
    # first on sys.path, where its json.py would replace the standard library's for Python
    wf_script = Path(sys.executable).parent / "wf"
    worker = subprocess.Popen(
        [str(wf_script), "worker", path, "--world", url],
        cwd=shadowing,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )

    async def result() -> object:
        async with worlds.open(url) as world:
            return await get_run(run_id, world=world).result(timeout=60)

    try:
        assert anyio.run(result) == 42
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "shadowing-flow" in err and "Traceback" not in err
    assert "defines no @workflow" not in err


def test_loading_a_file_named_like_a_stdlib_module_shadows_nothing_after_it(
    shadowing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded ``./queue.py`` leaves ``import queue`` finding the standard library's, in
    the same process: ``multiprocessing`` (spawn) imports it in every child it starts."""
    from typer.testing import CliRunner

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(shadowing)
    url = f"sqlite:///{shadowing}/w.db"
    result = CliRunner().invoke(app, ["start", "queue.py:flow", "1", "--world", url])
    assert result.exit_code == 0, result.output
    assert str(shadowing) in sys.path  # its neighbours stay importable
    for name in ("queue", "json"):
        found = importlib.machinery.PathFinder.find_spec(name, sys.path)
        assert found is not None and found.origin != str(shadowing / f"{name}.py"), name
