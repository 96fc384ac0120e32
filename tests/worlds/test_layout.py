"""The layout of ``worlds``: no import circles, and the flow/rows layering.

An import circle (``a`` imports ``b``, which imports ``a`` back, however
indirectly) makes the order modules load in matter and hides which of two
concepts is the lower one; ``TYPE_CHECKING`` imports count, since they are
the same dependency, deferred.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest


def _circles(package: str) -> list[tuple[str, ...]]:
    graph = grimp.build_graph(package, cache_dir=None)
    found = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                found.append((module, *back))
    return found


def test_no_module_inside_worlds_imports_one_that_imports_it_back() -> None:
    assert _circles("worlds") == []


def test_the_circle_finder_finds_a_type_checking_circle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: a circle closed only under ``TYPE_CHECKING`` is found."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circled.high import H\n"
    )
    (package / "high.py").write_text("from circled.low import *\nH = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert ("circled.high", "circled.low", "circled.high") in _circles("circled")


BACKENDS = ("worlds.memory", "worlds.sqlite", "worlds.postgres")


def test_backends_import_no_rule_module_only_flows_do() -> None:
    """rfcs/0019: the order an operation asks the rules in is written once, in
    ``worlds._flows``; a backend reads and writes rows (the same holds as an
    import-linter contract in ``pyproject.toml``)."""
    graph = grimp.build_graph("worlds", cache_dir=None)
    rules = {m for m in graph.modules if m.startswith("worlds._rules")}
    direct = {
        (module, imported)
        for module in graph.modules
        if module.startswith(BACKENDS)
        for imported in graph.find_modules_directly_imported_by(module)
        if imported in rules
    }
    assert direct == set()
    flows = {
        imported
        for module in graph.modules
        if module.startswith("worlds._flows")
        for imported in graph.find_modules_directly_imported_by(module)
    }
    assert flows & rules, "the flows are where the rules are asked"
