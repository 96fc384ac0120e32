"""Streams written from steps: ``World.append_stream``, for every backend.

Chunks are taken only while the run and the stream are open (``streams.accepts``),
read in the same transaction as the run's status, so none lands after the run or
the stream closed; each append wakes the run's followers (RFC 0012).
"""

from __future__ import annotations

from collections.abc import Sequence

from worlds._flows.rows import Rows
from worlds._rules import streams
from worlds.protocol import run_topic

__all__ = ["append_stream", "check_name"]


def check_name(name: str) -> str:
    """``name`` if it may name a stream, else ``ValueError`` (before any transaction)."""
    return streams.check_name(name)


async def append_stream(rows: Rows, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
    """See ``World.append_stream``: the first chunk's offset, ``None`` for a closed or
    unknown run (nothing written)."""
    run = await rows.get_run(run_id)
    status = None if run is None else run.status
    if not streams.accepts(status, run is not None and await rows.stream_closed(run_id, name)):
        return None
    first = await rows.append_stream(run_id, name, chunks)
    rows.signal(run_topic(run_id))
    return first
