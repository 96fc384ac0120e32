"""The README's snippets are the code the suite runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_section(title: str) -> str:
    """The text of README section ``## title``, up to the next ``## `` heading."""
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def python_blocks(section: str) -> list[str]:
    """The fenced ``python`` blocks of ``section``, in order."""
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_testing_section_shows_the_test_file_the_suite_runs() -> None:
    """examples/test_checkout.py runs in the suite (testpaths); the README shows it whole."""
    (block,) = python_blocks(readme_section("Testing your workflows"))
    assert block == (ROOT / "examples" / "test_checkout.py").read_text()


def test_the_observability_snippets_run_and_print_what_the_readme_says(tmp_path: Path) -> None:
    section = readme_section("Observability")
    program = "\n".join(python_blocks(section))
    (expected,) = re.findall(r"```text\n(.*?)```", section, flags=re.DOTALL)
    (tmp_path / "snippets.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "snippets.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (done.stderr + done.stdout).splitlines() == expected.splitlines()


def test_the_production_snippet_runs_and_prints_what_the_readme_says(tmp_path: Path) -> None:
    section = readme_section("Running in production")
    (program,) = python_blocks(section)
    (expected,) = re.findall(r"```text\n(.*?)```", section, flags=re.DOTALL)
    (tmp_path / "snippet.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "snippet.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
