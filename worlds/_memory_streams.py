"""Streams of the memory world: each run's named, append-only lists of chunks."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime

from worlds.protocol import run_topic
from worlds.types import StreamChunk

__all__ = ["StreamStore"]


class StreamStore:
    """The memory world's streams, keyed by (run id, stream name)."""

    def __init__(self, signal: Callable[[str], None]) -> None:
        """An append ``signal``s the run's topic, waking its readers."""
        self._signal = signal
        self._streams: dict[tuple[str, str], list[StreamChunk]] = {}

    def append(self, run_id: str, name: str, chunks: Sequence[bytes], now: datetime) -> int:
        """Append ``chunks`` to the stream; the offset of the first."""
        stream = self._streams.setdefault((run_id, name), [])
        first = len(stream)
        stream.extend(
            StreamChunk(offset=first + n, data=data, at=now) for n, data in enumerate(chunks)
        )
        self._signal(run_topic(run_id))
        return first

    def read(self, run_id: str, name: str, start: int, limit: int) -> list[StreamChunk]:
        """See ``World.read_stream``."""
        stream = self._streams.get((run_id, name), [])
        return stream[max(start, 0) : max(start, 0) + max(limit, 0)]

    def forget_runs(self, run_ids: Collection[str]) -> None:
        """Drop the streams of the pruned ``run_ids``."""
        self._streams = {k: v for k, v in self._streams.items() if k[0] not in run_ids}
