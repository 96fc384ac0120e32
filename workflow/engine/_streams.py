"""``write_stream`` in workflow code: a ``StreamWritten`` command.

The world appends the chunk to the run's stream when the command commits,
once; replay matches the recorded command and writes nothing.
"""

from __future__ import annotations

from workflow.engine._recorder import Recorder
from worlds.types import StreamWritten

__all__ = ["Streams"]


class Streams:
    """One run's stream writes."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    def write(self, name: str, data: bytes) -> None:
        """Record a chunk for stream ``name`` (or match it against the log)."""
        self._recorder.record(
            f"write_stream({name!r})",
            StreamWritten,
            lambda: StreamWritten(name=name, data=data),
            lambda recorded: recorded.name == name,
        )
