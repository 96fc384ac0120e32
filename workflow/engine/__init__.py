"""The engine: the deterministic replay loop and the worker that drives it.

User-facing modules never import this package; they reach the engine only
through the abstract runtime in ``workflow._runtime``.
"""

from workflow.engine.replayer import decode_history, encode_history, replay
from workflow.engine.worker import Worker

__all__ = ["Worker", "decode_history", "encode_history", "replay"]
