"""PEP 561: a user's type checker sees the package's types (``py.typed``).

The package is built the way a wheel is (setuptools ``build_py``: the modules
and package data a wheel would hold) into a scratch directory that a throwaway
interpreter sees as installed; mypy then checks a small user program against it.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Its module fixture (an interpreter holding the built package) is built once per worker that runs
# one of its tests, and again whenever that worker moves between modules: the group keeps the
# module on one worker, in a row (rfcs/0020-test-suite.md).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("typed_package")]

GOOD = """
from workflow import Run, Unique, Worker, start, step, workflow
from workflow.testing import TestEnvironment
import worlds


@step(max_retries=2)
async def charge(order_id: str, cents: int) -> str:
    return f"pay-{order_id}"


@workflow
async def checkout(order_id: str, cents: int) -> str:
    return await charge(order_id, cents)


async def main() -> str:
    world = worlds.open("memory://")
    async with world, Worker(world, [checkout]):
        run: Run[str] = await start(checkout, "o-1", 1999, world=world,
                                    attributes={"order": Unique("o-1")})
        return await run.result()


async def test() -> None:
    async with TestEnvironment(workflows=[checkout]) as env:
        run = await env.start(checkout, "o-1", 5)
        paid: str = await run.result()
        print(paid.upper())
"""

BAD = """
from workflow import start, workflow


@workflow
async def checkout(order_id: str) -> str:
    return order_id


async def main() -> int:
    run = await start(checkout, "o-1")
    return await run.result()
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A throwaway interpreter whose site-packages holds the built package and its deps."""
    scratch = tmp_path_factory.mktemp("typed")
    lib = scratch / "lib"
    subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py",
         "--build-lib", str(lib)],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    assert (lib / "workflow" / "py.typed").exists()
    assert (lib / "worlds" / "py.typed").exists()
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    deps = sysconfig.get_paths()["purelib"]  # msgspec, anyio, ... as this suite has them
    (site / "built.pth").write_text(f"{lib}\n{deps}\n")
    return venv / "bin" / "python"


def mypy(program: str, python: Path, where: Path) -> subprocess.CompletedProcess[str]:
    where.mkdir()
    (where / "app.py").write_text(textwrap.dedent(program))
    (where / "mypy.ini").write_text("[mypy]\nstrict = True\n")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(python), "--no-incremental",
         "--config-file", "mypy.ini", "app.py"],
        cwd=where, capture_output=True, text=True,
    )  # fmt: skip


def test_a_user_program_type_checks_against_the_installed_package(
    installed: Path, tmp_path: Path
) -> None:
    checked = mypy(GOOD, installed, tmp_path / "good")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_wrong_result_type_is_reported(installed: Path, tmp_path: Path) -> None:
    """The types are really seen: Run[str].result() is not an int."""
    checked = mypy(BAD, installed, tmp_path / "bad")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert 'Incompatible return value type (got "str", expected "int")' in checked.stdout
    assert "py.typed" not in checked.stdout
