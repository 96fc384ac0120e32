"""The README's snippets are the code the suite runs."""

from __future__ import annotations

import re
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
