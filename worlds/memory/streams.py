"""Streams of the memory world: each run's named, append-only lists of chunks."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from worlds.memory.journal import Journal
from worlds.types import StreamChunk

__all__ = ["StreamStore"]


class StreamStore:
    """The memory world's streams, keyed by (run id, stream name)."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._streams: dict[tuple[str, str], list[StreamChunk]] = {}
        self._closed: dict[tuple[str, str], bool] = {}

    def append(self, run_id: str, name: str, chunks: Sequence[bytes], now: datetime) -> int:
        """Append ``chunks`` to the stream; the offset of the first."""
        key = (run_id, name)
        if key not in self._streams:
            self._journal.put(self._streams, key, [])
        stream = self._streams[key]
        first = len(stream)
        stream.extend(
            StreamChunk(offset=first + n, data=data, at=now) for n, data in enumerate(chunks)
        )
        self._journal.record(lambda: stream.__delitem__(slice(first, None)))
        return first

    def close(self, run_id: str, name: str) -> None:
        """Mark the stream closed."""
        if (run_id, name) not in self._closed:
            self._journal.put(self._closed, (run_id, name), True)

    def is_closed(self, run_id: str, name: str) -> bool:
        """Whether the stream is closed."""
        return (run_id, name) in self._closed

    def dump(self) -> list[tuple[str, str, StreamChunk]]:
        """Every chunk: its run, its stream's name and the chunk."""
        return [(run, name, c) for (run, name), chunks in self._streams.items() for c in chunks]

    def load(self, run_id: str, name: str, chunk: StreamChunk) -> None:
        """Append ``chunk`` (the stream's next offset) as it is."""
        key = (run_id, name)
        if key not in self._streams:
            self._journal.put(self._streams, key, [])
        stream = self._streams[key]
        stream.append(chunk)
        self._journal.record(lambda: stream.__delitem__(slice(len(stream) - 1, None)))

    def read(self, run_id: str, name: str, start: int, limit: int) -> list[StreamChunk]:
        """See ``World.read_stream``."""
        stream = self._streams.get((run_id, name), [])
        return stream[max(start, 0) : max(start, 0) + max(limit, 0)]

    def forget_runs(self, run_ids: Collection[str]) -> None:
        """Drop the streams of the pruned ``run_ids``."""
        for key in [key for key in self._streams if key[0] in run_ids]:
            self._journal.pop(self._streams, key)
        for key in [key for key in self._closed if key[0] in run_ids]:
            self._journal.pop(self._closed, key)
