"""The guides' snippets (docs/guides/, linked from the README) are the code the suite runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def guide(name: str) -> str:
    """The text of the guide ``docs/guides/{name}.md`` (the README links to each)."""
    assert f"(docs/guides/{name}.md)" in (ROOT / "README.md").read_text()
    return (ROOT / "docs" / "guides" / f"{name}.md").read_text()


def python_blocks(section: str) -> list[str]:
    """The fenced ``python`` blocks of ``section``, in order."""
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_testing_section_shows_the_test_file_the_suite_runs() -> None:
    """examples/test_checkout.py runs in the suite (testpaths); the README shows it whole."""
    (block,) = python_blocks(guide("testing"))
    assert block == (ROOT / "examples" / "test_checkout.py").read_text()


def test_the_observability_snippets_run_and_print_what_the_readme_says(tmp_path: Path) -> None:
    section = guide("observability")
    program = "\n".join(python_blocks(section))
    (expected,) = re.findall(r"```text\n(.*?)```", section, flags=re.DOTALL)
    (tmp_path / "snippets.py").write_text(program)
    done = subprocess.run(
        [sys.executable, "snippets.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (done.stderr + done.stdout).splitlines() == expected.splitlines()
