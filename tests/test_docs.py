"""The documentation site builds with warnings as errors, and its API reference covers
every public name (``mkdocs.yml``, ``docs/``; rfcs/0026-docs-and-packaging.md)."""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Its module fixture (the site, a mkdocs build of 15-20 s) is built once per worker that runs one
# of its tests, and again whenever that worker moves between modules: the group keeps the module
# on one worker, in a row (rfcs/0020-test-suite.md).
pytestmark = pytest.mark.xdist_group("docs_site")

# The modules whose ``__all__`` the reference must cover, whole.
DOCUMENTED = [
    "workflow",
    "workflow.policies",
    "workflow.schedules",
    "workflow.testing",
    "worlds.semantics",
    "worlds.testing",
]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config),
         "-d", str(site)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def inventory(site: Path) -> set[str]:
    """The object names of the site's ``objects.inv`` (Sphinx inventory, version 2)."""
    raw = (site / "objects.inv").read_bytes()
    body = raw.split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines()}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.mark.parametrize("module", DOCUMENTED)
def test_the_reference_covers_every_public_name(site: Path, module: str) -> None:
    names = inventory(site)
    namespace = importlib.import_module(module)
    missing = [
        name
        for name in namespace.__all__
        if f"{module}.{name}" not in names
        # A re-exported module is documented under its own name.
        and getattr(getattr(namespace, name), "__name__", None) not in names
    ]
    assert missing == []


def test_the_site_has_the_overview_the_cli_and_every_rfc(site: Path) -> None:
    assert "attributes as the idempotency primitive" in (site / "index.html").read_text()
    assert (site / "cli" / "index.html").exists()
    for rfc in (ROOT / "rfcs").glob("*.md"):
        assert (site / "rfcs" / rfc.stem / "index.html").exists(), rfc.name


def test_a_reference_to_a_name_that_is_gone_breaks_the_build(tmp_path: Path) -> None:
    """What a renamed function does to a page that names it: the build fails, the reader
    never sees a dead reference."""
    for part in ("docs", "rfcs"):
        shutil.copytree(ROOT / part, tmp_path / part)
    for part in ("mkdocs.yml", "README.md", "ARCHITECTURE.md"):
        shutil.copy(ROOT / part, tmp_path / part)
    for package in ("workflow", "worlds"):
        (tmp_path / package).symlink_to(ROOT / package)
    page = tmp_path / "docs" / "reference" / "workflow.md"
    page.write_text(page.read_text() + "\nSee [start_run][workflow.start_run].\n")
    broken = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert broken.returncode == 1
    assert "workflow.start_run" in broken.stdout + broken.stderr


def test_the_tutorial_prints_what_it_says_and_its_commands_work(tmp_path: Path) -> None:
    tutorial = (ROOT / "docs" / "tutorial.md").read_text()
    (program,) = re.findall(r"```python\n(.*?)```", tutorial, flags=re.DOTALL)
    expected = re.findall(r"```text\n(.*?)```", tutorial, flags=re.DOTALL)[0]
    (tmp_path / "shop.py").write_text(program)
    ran = subprocess.run(
        [sys.executable, "shop.py", "tutorial.db"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == expected
    shell = re.findall(r"```sh\n(.*?)```", tutorial, flags=re.DOTALL)
    for line in "".join(shell).splitlines():
        if line.startswith("wf ") and " worker " not in f" {line} " and " ui " not in line:
            done = subprocess.run(
                [sys.executable, "-m", "workflow.cli", *shlex.split(line)[1:]],
                cwd=tmp_path, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, f"{line}: {done.stderr}"
