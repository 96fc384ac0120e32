"""The one place ``wf`` turns a MODULE argument into a module: a dotted name or a .py path.

``wf worker``, ``wf start MODULE:WORKFLOW`` and ``--codec MODULE:NAME`` all
resolve their module here, so they agree on what a name means:

- A path (it ends in ``.py`` or holds a ``/``) loads that file, whatever it is
  called: ``./json.py`` is the user's file, never the standard library's
  ``json``. A file whose name is taken (by the standard library, or by a module
  already imported) is loaded under a name of its own, so it shadows nothing.
  Its directory goes at the end of ``sys.path``, so it can import its
  neighbours without its ``queue.py`` shadowing the standard library's
  ``queue`` for the rest of the process (``multiprocessing`` imports it).
- A dotted name is imported from ``sys.path`` or the working directory, except
  that a name the standard library owns is refused with a message saying so
  (and, when ``./NAME.py`` is there, that the file is shadowed and how to load
  it): ``import queue`` can only ever find the standard library's ``queue``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path

from worlds.quoting import quoted

from ._resolve import EXIT_ERROR, EXIT_USAGE, CliError

__all__ = ["load_module", "looks_like_path"]

_STANDARD = frozenset(sys.stdlib_module_names) | frozenset(sys.builtin_module_names)


def looks_like_path(spec: str) -> bool:
    """Whether ``spec`` names a file rather than a dotted module name."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def load_module(spec: str) -> types.ModuleType:
    """The module ``spec`` names: a dotted module name, or the path of a .py file.

    Raises:
        CliError: not a .py file, or a name the standard library owns (exit 2);
            the module cannot be imported or raised while importing (exit 1).
    """
    if looks_like_path(spec):
        return _from_path(spec)
    top = spec.split(".", 1)[0]
    if top in _STANDARD:
        local = [p for p in (Path(f"{top}.py"), Path(top)) if p.exists()]
        shadowed = (
            f"; ./{local[0]} is not loaded, because the name is the standard library's: "
            f"pass its path (./{top}.py) or rename it"
            if local
            else "; pass the path of your .py file or rename your module"
        )
        raise CliError(
            f"{quoted(spec)} names the standard library's module {top!r}, not yours{shadowed}",
            EXIT_USAGE,
        )
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # last: the standard library stays the standard library
    return _run_import(spec, lambda: importlib.import_module(spec))


def _from_path(spec: str) -> types.ModuleType:
    path = Path(spec)
    if path.suffix != ".py" or not path.is_file():
        raise CliError(
            f"{quoted(spec)} is not a .py file; give a .py file or a module name"
            " (e.g. myapp.workflows)",
            EXIT_USAGE,
        )
    path = path.resolve()
    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__file__", None) == str(path):
            return loaded  # already loaded (a worker file also named by --codec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # last, like the working directory above
    name = path.stem
    if name in _STANDARD or name in sys.modules or not name.isidentifier():
        name = f"wf_user_module_{abs(hash(str(path)))}"  # shadows nothing
    found = importlib.util.spec_from_file_location(name, path)
    if found is None or found.loader is None:
        raise CliError(f"cannot load {quoted(spec)} as a Python module", EXIT_ERROR)
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module  # the module may import itself (dataclasses need it)
    loader = found.loader

    def execute() -> types.ModuleType:
        try:
            loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module

    return _run_import(spec, execute)


def _run_import(spec: str, load: Callable[[], types.ModuleType]) -> types.ModuleType:
    try:
        return load()
    except ImportError as exc:
        raise CliError(f"cannot import {quoted(spec)}: {exc}", EXIT_ERROR) from None
    except Exception as exc:
        raise CliError(
            f"importing {quoted(spec)} raised {type(exc).__name__}: {exc}", EXIT_ERROR
        ) from None
