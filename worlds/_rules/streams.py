"""Streams: ordered chunks a run writes for any process to follow.

A run has any number of named streams. Each is a sequence of opaque chunks
numbered from offset 0 without gaps, in the order the world accepted them.
Workflow code writes through a ``StreamWritten`` command: the world appends
the chunk in the transaction that commits the command, so a replayed body
never writes it again. Step code writes directly (``World.append_stream``).

A world accepts chunks only while the run is open and the stream is not
closed (``accepts``), in the same transaction that reads the run's status, so
no chunk lands after the run (or the stream) closed: a reader that sees the run
or the stream closed and then reads to the end has read everything. Workflow
code closes a stream with a ``StreamClosed`` command (``close_stream``),
marked in the transaction that commits it, after every chunk the body wrote
before it. Each append signals the run's topic (``run_topic``) so followers
wake; pruning a run deletes its streams.
"""

from __future__ import annotations

from collections.abc import Iterable

from worlds.quoting import quoted
from worlds.types import EventKind, RunStatus, StreamWritten

__all__ = ["MAX_NAME_LENGTH", "accepts", "check_name", "written"]

MAX_NAME_LENGTH = 256


def check_name(name: str) -> str:
    """``name`` if it may name a stream (1-256 characters, no NUL), else ``ValueError``."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME_LENGTH or "\x00" in name:
        raise ValueError(f"a stream name is 1-{MAX_NAME_LENGTH} characters, got {quoted(name)}")
    return name


def accepts(status: RunStatus | None, stream_closed: bool = False) -> bool:
    """Whether a run in ``status`` (None: no such run) takes new chunks on a stream
    (``stream_closed``: closed by ``close_stream``): while both are open."""
    return status is not None and not status.is_closed and not stream_closed


def written(events: Iterable[EventKind]) -> list[StreamWritten]:
    """The stream writes among a commit's ``events``, in order."""
    return [event for event in events if isinstance(event, StreamWritten)]
