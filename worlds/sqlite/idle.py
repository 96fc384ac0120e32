"""The SQLite world's change token: the files every commit of every process writes.

A commit in WAL mode appends to the ``-wal`` file (and a checkpoint writes the
database file), so their sizes and modification times change with every
write, from whichever process. ``worlds._quiet`` answers a poll that found
nothing from memory while this token stays the same.
"""

from __future__ import annotations

import os
from collections.abc import Hashable

__all__ = ["file_token"]


def file_token(path: str) -> Hashable | None:
    """The size, modification time and inode of the database file and its WAL, or
    ``None`` (an in-memory database, or a file that cannot be read): no token."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    token: list[int] = []
    for name in (path, f"{path}-wal"):
        try:
            found = os.stat(name)
        except FileNotFoundError:
            token += (-1, -1, -1)
            continue
        except OSError:
            return None
        token += (found.st_size, found.st_mtime_ns, found.st_ino)
    return tuple(token)
