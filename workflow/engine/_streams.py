"""``write_stream`` and ``close_stream`` in workflow code: ``StreamWritten`` and
``StreamClosed`` commands.

The world appends the chunk to the run's stream (or marks the stream closed)
when the command commits, once; replay matches the recorded command and writes
nothing. Which streams the body closed is rebuilt by replay itself, so a write
after a close is refused the same way every time.
"""

from __future__ import annotations

from workflow.engine._recorder import Recorder
from workflow.errors import StreamClosedError
from worlds.types import StreamClosed, StreamWritten

__all__ = ["Streams"]


class Streams:
    """One run's stream writes and closes."""

    def __init__(self, recorder: Recorder, run_id: str) -> None:
        self._recorder = recorder
        self._run_id = run_id
        self._closed: set[str] = set()

    def write(self, name: str, data: bytes) -> None:
        """Record a chunk for stream ``name`` (or match it against the log).

        Raises:
            StreamClosedError: the body closed the stream before (nothing recorded).
        """
        if name in self._closed:
            raise StreamClosedError(self._run_id, name)
        self._recorder.record(
            f"write_stream({name!r})",
            StreamWritten,
            lambda: StreamWritten(name=name, data=data),
            lambda recorded: recorded.name == name,
        )

    def close(self, name: str) -> None:
        """Record the close of stream ``name`` (or match it); a second close does nothing."""
        if name in self._closed:
            return
        self._closed.add(name)
        self._recorder.record(
            f"close_stream({name!r})",
            StreamClosed,
            lambda: StreamClosed(name=name),
            lambda recorded: recorded.name == name,
        )
