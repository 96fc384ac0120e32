"""What both SQL worlds' migration packages keep: one module per version, saying what and why."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType


def versions_by_module(package: ModuleType) -> dict[int, tuple[str, ...]]:
    """Each ``v<NN>_<what>`` module's ``STATEMENTS`` by version, after checking that its
    docstring says what the version does and why."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        assert re.fullmatch(r"v\d\d_[a-z_]+", info.name), info.name
        doc = module.__doc__ or ""
        assert "What:" in doc and "Why:" in doc, f"{info.name} does not say what and why"
        found[int(info.name[1:3])] = module.STATEMENTS
    return found
