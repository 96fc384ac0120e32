"""The distribution installs like one: a wheel and an sdist that ``twine check``
accepts, no top-level ``cli`` module, one version, and the quickstart and ``wf``
working from the wheel alone (no repository on the path)."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

import workflow

ROOT = Path(__file__).resolve().parents[2]

# Its module fixture (the wheel and sdist and a virtualenv, 35-55 s) is built once per worker that
# runs one of its tests, and again whenever that worker moves between modules: the group keeps the
# module on one worker, in a row (rfcs/0020-test-suite.md).
pytestmark = pytest.mark.xdist_group("packaging")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def packages_in_the_tree() -> set[str]:
    """Every importable package of ``workflow`` and ``worlds``, plus the CLI's folder
    under the name it installs as."""
    found = {"workflow.cli"}
    for top in ("workflow", "worlds"):
        for init in (ROOT / top).rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def test_the_package_list_names_every_package_of_the_tree() -> None:
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == packages_in_the_tree()
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"workflow.cli": "cli"}


def test_the_cli_imports_its_own_modules_relatively() -> None:
    """``cli/`` installs as ``workflow.cli``: an absolute ``cli.`` import would break there."""
    offences = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            offences += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "cli"]
    assert offences == []


def test_one_version_source() -> None:
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", workflow.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {workflow.__version__}" in changelog


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and sdist, built as a release would be (``python -m build``)."""
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy: building writes build/ and *.egg-info beside the sources, and
    # two test processes building one tree at once would trip over each other.
    source = tmp_path_factory.mktemp("source") / "tree"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            ".*_cache",
            ".hypothesis",
            "site",
            "build",
            "*.egg-info",
            "__pycache__",
            ".workflow",
            "dist",
        ),
    )
    built = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


@pytest.mark.slow
def test_twine_accepts_the_wheel_and_the_sdist(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"]
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean virtualenv holding only the built wheel; its dependencies are this suite's
    (a path line, so no editable install or ``.pth`` of the suite's is seen)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheel = next(dist.glob("*.whl"))
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "suite_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def clean_env() -> dict[str, str]:
    """The environment without the suite's ``PYTHONPATH`` and world settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "WORKFLOW_"))}


@pytest.mark.slow
def test_the_wheel_alone_runs_the_quickstart_and_wf(installed: Path, tmp_path: Path) -> None:
    python, wf = installed / "bin" / "python", installed / "bin" / "wf"
    shutil.copy(ROOT / "examples" / "quickstart.py", tmp_path / "quickstart.py")
    where = subprocess.run(
        [python, "-c", "import workflow, worlds; print(workflow.__file__, worlds.__file__)"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert str(ROOT) not in where.stdout and str(installed) in where.stdout
    quickstart = subprocess.run(
        [python, "quickstart.py"], cwd=tmp_path, env=clean_env(), capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert quickstart.returncode == 0, quickstart.stderr
    assert "RunCompleted" in quickstart.stdout
    version = subprocess.run(
        [wf, "--version"], cwd=tmp_path, env=clean_env(), capture_output=True, text=True
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"wf (attribute-workflows) {workflow.__version__}"
    listed = subprocess.run(
        [wf, "runs", "list", "--world", f"sqlite:///{tmp_path}/.workflow/world.db"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert "completed" in listed.stdout


@pytest.mark.slow
def test_the_wheel_installs_no_top_level_cli_module(installed: Path, tmp_path: Path) -> None:
    imported = subprocess.run(
        [installed / "bin" / "python", "-c", "import cli"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True,
    )  # fmt: skip
    assert imported.returncode == 1
    assert "No module named 'cli'" in imported.stderr
    dist_info = next(installed.glob("lib/python3*/site-packages/attribute_workflows-*.dist-info"))
    installed_files = [
        line.split(",")[0] for line in (dist_info / "RECORD").read_text().splitlines()
    ]
    assert not [f for f in installed_files if f.startswith("cli/")]
    assert any(f.startswith("workflow/cli/main.py") for f in installed_files)
