"""The engine: the deterministic replay loop and the worker that drives it.

User-facing modules never import this package; they reach the engine only
through the abstract runtime in ``workflow._runtime``.
"""

from workflow.engine.worker import Worker

__all__ = ["Worker"]
