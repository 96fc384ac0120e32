"""The shape of the code: no module reaches into another's private names, and the
modules of ``workflow/`` import each other without circles (``TYPE_CHECKING``
imports included).

Read from the source with ``ast``, so what is checked is what is written: an
import inside a function or under ``if TYPE_CHECKING:`` counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "workflow"

ALLOWED_PRIVATE_ATTRIBUTES = {
    # asyncio's own hooks for an event loop of its own (``WorkflowLoop``)
    "workflow/engine/_loop.py": {"_get_running_loop", "_set_running_loop", "_cancelled", "_run"},
}

ALLOWED_CIRCLES = [
    # A step call asks the runtime (decorators imports _runtime); Runtime.call_step's
    # signature names StepDefinition (an import for type checking). Documented in
    # workflow/_runtime.py.
    {"workflow._runtime", "workflow.decorators"},
]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def sources() -> Iterator[tuple[Path, str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, module_name(path), ast.parse(path.read_text(), str(path))


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(tree: ast.Module) -> set[str]:
    """Every name a module defines: functions, classes, assigned names and attributes."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def imported_modules(module: str, tree: ast.Module) -> set[str]:
    """The project modules ``module`` imports (a name imported from a package counts
    as an import of the package, a submodule imported from it as the submodule)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if is_module(sub) else node.module)
    return {name for name in found if name.split(".")[0] == "workflow" and name != module}


def private_offences(where: str, module: str, tree: ast.Module) -> list[str]:
    """Where ``module`` (at ``where``) takes a private name from another module: an
    import of one, or an attribute the module does not define itself."""
    own = defined_names(tree) | ALLOWED_PRIVATE_ATTRIBUTES.get(where, set())
    offences = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module != module:
            offences += [
                f"{where}:{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if private(alias.name) and not is_module(f"{node.module}.{alias.name}")
            ]
        elif isinstance(node, ast.Attribute) and private(node.attr) and node.attr not in own:
            offences.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return sorted(offences)


def test_no_module_reaches_into_another_modules_private_names() -> None:
    offences = [
        offence
        for path, module, tree in sources()
        for offence in private_offences(path.relative_to(ROOT).as_posix(), module, tree)
    ]
    assert offences == [], "private names used across modules:\n" + "\n".join(offences)


def test_the_private_name_check_finds_what_it_is_for() -> None:
    source = (
        "from workflow import _runtime\n"
        "from workflow.engine.worker import _STOPS_STEPS\n"
        "class Part:\n"
        "    def run(self, worker):\n"
        "        self._own = _runtime.current()\n"
        "        return worker._cache, self._own, self.__class__\n"
    )
    assert private_offences("part.py", "workflow.part", ast.parse(source)) == [
        "part.py:2: from workflow.engine.worker import _STOPS_STEPS",
        "part.py:6: worker._cache",
    ]


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import circles of ``graph``: its strongly connected parts of two or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, set()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            part = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.add(member)
                if member == node:
                    break
            if len(part) > 1:
                circles.append(part)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_workflow_modules_import_each_other_without_circles() -> None:
    graph = {module: imported_modules(module, tree) for _, module, tree in sources()}
    circles = [sorted(part) for part in strongly_connected(graph) if part not in ALLOWED_CIRCLES]
    assert circles == [], f"import circles in workflow/: {circles}"


def test_the_circle_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
