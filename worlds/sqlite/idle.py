"""The SQLite world's idle polls: the files' change token, and one look for work and schedules.

A commit in WAL mode appends to the ``-wal`` file (and a checkpoint writes the
database file), so their sizes and modification times change with every
write, from whichever process. ``worlds._quiet`` answers a poll that found
nothing from memory while this token (and the count of the poll's topic's
signals in this process) stays the same.

When the token changed (a write here or elsewhere, this worker's own
heartbeat included), the next poll asks the database once for both kinds of
poll (``IdleLook.look``: one statement, ``statements.idle_look_sql``): when
the earliest work item of the worker's names becomes leasable, whether a
schedule of its workflows is due, the next wake time and the first schedule
lease to run out. Each kind that finds nothing due is remembered, so the other
poll is answered without a query of its own: an idle worker costs one
statement per change of the file, not one per poll and kind.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Hashable
from datetime import datetime
from typing import NamedTuple

from worlds._quiet import Quiet, poll_key
from worlds._signals import SignalHub
from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC
from worlds.sqlite import codecs
from worlds.sqlite import statements as sql
from worlds.types import utcnow

__all__ = ["IdleLook", "Looked", "file_token"]


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


class Looked(NamedTuple):
    """What one ``IdleLook.look`` found for the poll that asked."""

    due: bool
    """Something of the asking poll's kind may be leasable now: lease for real."""
    wake: datetime | None
    """Schedules: the next wake time after now (``ScheduleLease.next_wake_at``)."""


class IdleLook:
    """The polls of one SQLite world object: their ``Quiet`` memory, the token, the look.

    Args:
        path: the database file.
        hub: the signals of every world object on the file in this process.
    """

    def __init__(self, path: str, hub: SignalHub) -> None:
        self._path = path
        self._hub = hub
        self.quiet = Quiet()
        self._names: dict[str, tuple[str, ...]] = {}
        """The names each topic was last polled with: the look asks for both kinds."""

    def token(self, topic: str, names: Collection[str] = ()) -> Hashable | None:
        """The change token of a poll of ``topic`` for ``names``: the files, and this
        process's signals (every write changes the files, whatever it made due)."""
        files = file_token(self._path)
        return None if files is None else (files, self._hub.heard(topic, names))

    def quiet_poll(self, topic: str, names: tuple[str, ...]) -> bool:
        """Whether the poll of ``topic`` for ``names`` is answered from memory now."""
        self._names[topic] = names
        return self.quiet.quiet(poll_key(topic, names), self.token(topic, names))

    def look(self, db: sqlite3.Connection, topic: str) -> Looked:
        """One statement for both polls; remembers each that found nothing due.

        Tokens are taken before the statement, so a write that lands meanwhile makes
        the next poll look again."""
        tokens = {each: self.token(each, names) for each, names in self._names.items()}
        work = self._names.get(WORK_TOPIC, ())
        workflows = self._names.get(SCHEDULE_TOPIC, ())
        now_us = codecs.to_micros(utcnow())
        statement = sql.idle_look_sql(len(work), len(workflows))
        row = db.execute(statement, (now_us, *work, *workflows)).fetchone()
        leasable, schedule_due, later, ends = row

        def seconds(at: int | None) -> float | None:
            return None if at is None else (at - now_us) / 1e6

        wake = codecs.from_micros_or_none(later)
        found: dict[str, bool] = {}
        if work:
            poll = poll_key(WORK_TOPIC, work)
            if leasable is not None and leasable <= now_us:
                found[WORK_TOPIC] = True
                self.quiet.forget(poll)
            else:
                self.quiet.found(poll, tokens[WORK_TOPIC], seconds(leasable))
        if workflows:
            poll = poll_key(SCHEDULE_TOPIC, workflows)
            if schedule_due is not None:
                found[SCHEDULE_TOPIC] = True
                self.quiet.forget(poll)
            else:
                look_at = min((t for t in (later, ends) if t is not None), default=None)
                self.quiet.found(poll, tokens[SCHEDULE_TOPIC], seconds(look_at), wake)
        return Looked(found.get(topic, False), wake)
