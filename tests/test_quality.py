"""Static checks that keep the layering and typing honest: import-linter, mypy, ruff."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    assert found, f"{name} is not installed next to {sys.executable}; pip install -e '.[test]'"
    return found


def test_layers_hold() -> None:
    result = run(tool("lint-imports"))
    assert result.returncode == 0, result.stdout + result.stderr


LIBRARY = ("workflow", "worlds", "cli", "docs/_hooks")
# Checked too, with pyproject's less strict mypy override for these paths.
AROUND_THE_LIBRARY = ("tests", "examples", "benchmarks")


# Both mypy runs on one xdist worker, the library's first: the second then reads the
# library's modules from the cache the first wrote (a third less CPU than two cold runs
# on two workers; rfcs/0020-test-suite.md).
@pytest.mark.xdist_group("mypy")
def test_mypy_strict() -> None:
    result = run(sys.executable, "-m", "mypy", "--strict", *LIBRARY)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.xdist_group("mypy")
def test_mypy_tests_examples_benchmarks() -> None:
    result = run(sys.executable, "-m", "mypy", *AROUND_THE_LIBRARY)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]])
def test_ruff(args: list[str]) -> None:
    result = run(tool("ruff"), *args, *LIBRARY, *AROUND_THE_LIBRARY)
    assert result.returncode == 0, result.stdout + result.stderr
