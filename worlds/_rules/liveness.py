"""Worker liveness: when a registered worker is dead, and whose items may be taken.

A holder is not dead because its lease timer ran out, nor because its last
heartbeat is old by the clock: a frozen or unreachable world stops every
heartbeat at once, and by the clock alone everybody would be dead when it
comes back. A holder is dead when the world has *evidence*: another worker
was seen heartbeating steadily (no gap longer than half its own window) over
a whole window of the holder's, after the holder's last heartbeat. The
witness's beats prove the world was reachable over that window, so a holder
that did not beat in it is gone (or cut off from the world: then fencing
makes it harmless). The rule compares stored heartbeat times only, never the
reader's clock, so a stall of the whole world delays every verdict by one
window and declares nobody dead.

Proof sketch (RFC 0001, "Worker liveness"). Safety: a live worker that beats at
least once every ``window / 2`` while the world is reachable is never declared
dead. A witness's steady run ``[steady_since, last_beat]`` has no gap longer than
half the witness's window (a longer gap restarts it), and the witness's beats in
it prove the world answered at those instants; a world that answers the witness
answers the holder (one world), so the holder's beats land no more than
``window / 2`` apart inside the run, and no stretch of the run after the holder's
last beat reaches a full ``window``. A world-wide stall breaks every steady run
(the first beat after it finds a gap), so after it no witness has a run a window
long until a window has passed, in which every live holder has beaten again.
Liveness: a dead holder beats no more; any steady witness's run grows past the
holder's last beat by a window within one window (plus a heartbeat interval), and
the holder's items are then taken at the next lease.

Fencing: the transaction that declares a holder dead (a lease taking its item, or
its own heartbeat finding itself dead) marks it ``fenced`` and revokes all its
leases at once, so a zombie that comes back commits nothing under them and its
heartbeats answer False.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NamedTuple

from worlds.types import WorkerInfo, WorkerRecord, WorkerStatus

__all__ = [
    "RETENTION",
    "STEADY_GAP",
    "Beat",
    "beat",
    "is_dead",
    "may_take",
    "record",
    "register",
    "status",
]

STEADY_GAP = 0.5
"""The longest gap between two heartbeats, as a fraction of the worker's window,
that keeps its run of beats steady (evidence the world was reachable throughout)."""


RETENTION = timedelta(days=1)
"""How long a worker's row outlives its last heartbeat: a registration drops the
rows older than that, so worker processes that come and go do not grow the table
(a day-old row's holder is gone; its items fall back to the lease timer)."""


class Beat(NamedTuple):
    """A registered worker's row: who it is, its heartbeats and its state."""

    info: WorkerInfo
    started_at: datetime
    last_beat: datetime
    steady_since: datetime
    in_flight: int
    fenced: bool
    stopped: bool


def register(info: WorkerInfo, now: datetime) -> Beat:
    """A worker registering at ``now``: its first heartbeat, a steady run starting."""
    return Beat(info, now, now, now, 0, fenced=False, stopped=False)


def beat(worker: Beat, now: datetime, in_flight: int) -> Beat:
    """``worker`` heartbeating at ``now``: its steady run goes on, or restarts after
    a gap longer than ``STEADY_GAP`` of its window (a stall it or the world had)."""
    gap = timedelta(seconds=worker.info.liveness_seconds * STEADY_GAP)
    steady_since = worker.steady_since if now - worker.last_beat <= gap else now
    last_beat = max(now, worker.last_beat)
    return worker._replace(last_beat=last_beat, steady_since=steady_since, in_flight=in_flight)


def is_dead(holder: Beat, others: Iterable[Beat]) -> bool:
    """Whether ``holder`` is dead: fenced already, or some other worker's steady run
    reaches a whole window of ``holder``'s past its last heartbeat. A witness counts
    only with a window no longer than ``holder``'s, so its steady run has no gap
    longer than half of ``holder``'s window."""
    if holder.fenced:
        return True
    window = timedelta(seconds=holder.info.liveness_seconds)
    return any(
        other.info.id != holder.info.id
        and other.info.liveness_seconds <= holder.info.liveness_seconds
        and other.last_beat - max(holder.last_beat, other.steady_since) >= window
        for other in others
    )


def may_take(owner: Beat | None, others: Iterable[Beat], expired_at: datetime) -> bool:
    """Whether an item whose lease ran out at ``expired_at`` may be taken from ``owner``
    (its holder's row; ``None``: the holder never registered, and the lease timer
    decides): the holder stopped, is dead, or *forgot the item*: its own steady run
    of beats reaches a whole window past the lease's end, so the world answered it
    all along and it did not renew (a worker that dropped the item after an error)."""
    if owner is None or owner.stopped or is_dead(owner, others):
        return True
    window = timedelta(seconds=owner.info.liveness_seconds)
    return owner.last_beat - max(expired_at, owner.steady_since) >= window


def status(worker: Beat, others: Iterable[Beat], now: datetime) -> WorkerStatus:
    """``worker``'s status as ``list_workers`` shows it at ``now``."""
    if worker.fenced or (not worker.stopped and is_dead(worker, others)):
        return "dead"
    if worker.stopped:
        return "stopped"
    if now - worker.last_beat > timedelta(seconds=worker.info.liveness_seconds):
        return "silent"
    return "live"


def record(worker: Beat, others: Iterable[Beat], now: datetime) -> WorkerRecord:
    """``worker`` as ``list_workers`` returns it at ``now``."""
    info = worker.info
    return WorkerRecord(
        id=info.id,
        host=info.host,
        pid=info.pid,
        build_id=info.build_id,
        liveness_seconds=info.liveness_seconds,
        started_at=worker.started_at,
        last_heartbeat_at=worker.last_beat,
        in_flight=worker.in_flight,
        status=status(worker, others, now),
    )
