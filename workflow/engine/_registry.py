"""What a worker can run: its workflows and steps, by name."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from workflow.decorators import StepDefinition, WorkflowDefinition
from worlds.types import Pin

__all__ = ["Registry"]


class Registry:
    """The ``@workflow`` and ``@step`` functions one worker runs, by name."""

    def __init__(self) -> None:
        self._workflows: dict[str, WorkflowDefinition[..., Any]] = {}
        self._steps: dict[str, StepDefinition[..., Any]] = {}

    def register(self, fn: Any) -> None:
        """Add a workflow, a step, or every workflow and step of a module.

        A workflow brings along the steps its module defines or imports, and its
        ``on_failure`` handler.

        Raises:
            TypeError: ``fn`` is none of those.
            ValueError: another function is registered under ``fn``'s name.
        """
        if isinstance(fn, types.ModuleType):
            for value in vars(fn).values():
                if isinstance(value, (WorkflowDefinition, StepDefinition)):
                    self.register(value)
            return
        if isinstance(fn, WorkflowDefinition):
            table: dict[str, Any] = self._workflows
        elif isinstance(fn, StepDefinition):
            table = self._steps
        else:
            raise TypeError(f"Worker runs @workflow and @step functions (or modules), not {fn!r}")
        existing = table.get(fn.name)
        if existing is not None and existing is not fn:
            raise ValueError(
                f"two functions are registered as {fn.name!r}: {existing!r} and {fn!r}"
            )
        table[fn.name] = fn
        if existing is None and isinstance(fn, WorkflowDefinition) and fn.on_failure is not None:
            self.register(fn.on_failure)  # the worker that fails a run can run its handler
        if isinstance(fn, WorkflowDefinition):
            # the steps a workflow can call are those its module can see
            for value in list(getattr(fn.fn, "__globals__", {}).values()):
                if isinstance(value, StepDefinition):
                    self.register(value)

    def learn(self, steps: Mapping[str, StepDefinition[..., Any]]) -> None:
        """Add the steps a workflow body called (its module may not show them all)."""
        self._steps.update(steps)

    @property
    def names(self) -> frozenset[str]:
        """Names of everything registered."""
        return frozenset(self._workflows) | frozenset(self._steps)

    @property
    def workflow_names(self) -> frozenset[str]:
        """Names of the registered workflows."""
        return frozenset(self._workflows)

    def pins(self) -> dict[str, Pin]:
        """Each registered workflow's ``pin`` (RFC 0025), by name."""
        return {name: definition.pin for name, definition in self._workflows.items()}

    @property
    def moving(self) -> bool:
        """Whether some registered workflow is ``pin="latest"``."""
        return any(definition.pin == "latest" for definition in self._workflows.values())

    def workflow(self, name: str) -> WorkflowDefinition[..., Any] | None:
        """The workflow registered as ``name``, if any."""
        return self._workflows.get(name)

    def step(self, name: str) -> StepDefinition[..., Any] | None:
        """The step registered as ``name``, if any."""
        return self._steps.get(name)

    @property
    def steps(self) -> Mapping[str, StepDefinition[..., Any]]:
        """The registered steps, by name (read only)."""
        return self._steps
