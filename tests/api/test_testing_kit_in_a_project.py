"""The testing guide's test file passes in a user's project, where anyio also runs it on trio.

This repository's conftests pin anyio to asyncio; a user's project has no such
pin, and anyio's pytest plugin runs each ``pytest.mark.anyio`` test once per
backend installed. The ``[test]`` extra installs trio (through selenium), so the
copied project runs every test on asyncio and on trio.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.api.test_readme import ROOT, guide, python_blocks


def test_the_readme_test_file_passes_in_a_fresh_project_on_asyncio_and_trio(
    tmp_path: Path,
) -> None:
    assert importlib.util.find_spec("trio") is not None, "the [test] extra installs trio"
    (test_file,) = python_blocks(guide("testing"))
    project = tmp_path / "project"
    (project / "examples").mkdir(parents=True)
    # the workflow under test, as the README's file imports it; no conftest comes along
    (project / "examples" / "checkout.py").write_text(
        (ROOT / "examples" / "checkout.py").read_text()
    )
    (project / "test_checkout.py").write_text(test_file)
    (project / "pyproject.toml").write_text('[project]\nname = "shop"\nversion = "0"\n')
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTEST_", "PYTHONPATH"))  # the project's own pytest only
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "test_checkout.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    passed = set(re.findall(r"::(\w+\[\w+\]) PASSED", done.stdout))
    tests = set(re.findall(r"^async def (test_\w+)", test_file, flags=re.MULTILINE))
    assert len(tests) == 2
    assert passed == {f"{test}[{backend}]" for test in tests for backend in ("asyncio", "trio")}
