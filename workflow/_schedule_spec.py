"""What a schedule is: its checked definition and the arithmetic of its fire times.

A schedule fires on a cron expression in a timezone (computed by ``croniter``)
or every fixed interval (fire times are the multiples of the interval since
the Unix epoch, so ``every=5 minutes`` fires at :00, :05, ...; the shortest
interval is ``MIN_EVERY``, one second). The world stores the definition as
opaque bytes (``ScheduleSpec``).

Daylight saving, for a cron schedule: a local time skipped by a spring-forward
fires at the first instant after the gap; a local time repeated by a fall-back
(``30 2 * * *`` in ``Europe/Paris`` on the last Sunday of October) fires at
both instants with ``fall_back="twice"`` (the default) and only at the first
with ``fall_back="once"``. A cron expression that matches no date at all
(``0 0 30 2 *``) is refused when the schedule is created.
"""

from __future__ import annotations

import enum
import math
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped]

from workflow._spans import MAX_SPAN_SECONDS
from worlds.quoting import quoted
from worlds.types import EPOCH

__all__ = [
    "FALL_BACK",
    "MIN_CATCHUP",
    "MIN_EVERY",
    "Overlap",
    "ScheduleSpec",
    "check_cron",
    "check_every",
    "check_fall_back",
    "check_timezone",
    "decode_spec",
    "encode_spec",
    "fire_times",
    "next_fire",
]

MIN_CATCHUP = timedelta(seconds=1)
"""The shortest ``catchup_window``: a fire a worker handles a moment late is not missed."""

MIN_EVERY = timedelta(seconds=1)
"""The shortest ``every=``: a shorter interval would flood the world with runs."""

FALL_BACK = ("twice", "once")
"""How a cron schedule treats a local time a fall-back repeats: fire at both instants or
the first only."""

_MICROSECOND = timedelta(microseconds=1)


class Overlap(enum.StrEnum):
    """What a fire does while a run started earlier (or holding the shared pair) is open.

    ``SKIP``: the fire starts nothing. ``BUFFER_ONE``: the fire waits until
    the open run closes, and at most one fire waits. ``BUFFER_ALL``: every
    fire waits, in line: its run is created at once, pending, and starts when
    the runs of the fires before it have closed, one at a time, in fire order
    (a ``Limited`` slot of limit 1 on ``$schedule=<id>``). ``CANCEL_OTHER``: the
    open run is cancelled and the new one starts, atomically (the fenced
    takeover of ``start_or_cancel_run``). ``ALLOW_ALL``: every fire starts
    a run, whatever is open.
    """

    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"
    ALLOW_ALL = "allow_all"


class ScheduleSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A schedule's definition, as the SDK encodes it into ``ScheduleRecord.spec``."""

    args: bytes
    cron: str | None = None
    timezone: str = "UTC"
    every_us: int | None = None
    overlap: Overlap = Overlap.SKIP
    catchup_us: int
    attributes: dict[str, Any] = {}
    key: str | None = None
    value: Any = None
    fall_back: str = "twice"

    @property
    def every(self) -> timedelta | None:
        """The interval, for an interval schedule."""
        return None if self.every_us is None else timedelta(microseconds=self.every_us)

    @property
    def catchup_window(self) -> timedelta:
        """How old a missed fire time may be and still fire."""
        return timedelta(microseconds=self.catchup_us)


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ScheduleSpec)


def encode_spec(spec: ScheduleSpec) -> bytes:
    """The bytes a world stores for ``spec``."""
    return _encoder.encode(spec)


def decode_spec(data: bytes) -> ScheduleSpec:
    """The spec stored as ``data``."""
    return _decoder.decode(data)


def check_cron(cron: object) -> str:
    """``cron`` if ``croniter`` accepts it as a 5-field (or 6-field, seconds last) expression
    that matches some date (``0 0 30 2 *``, February 30th, never does)."""
    if not isinstance(cron, str):
        raise TypeError(f"cron must be a str like '0 3 * * *', not {type(cron).__name__}")
    fields = cron.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(cron):
        raise ValueError(
            f"cron {quoted(cron)} is not a valid cron expression: give 5 fields "
            "(minute hour day-of-month month day-of-week), like '0 3 * * *'"
        )
    cron = " ".join(fields)
    try:
        croniter(cron, datetime.now(UTC)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(
            f"cron {quoted(cron)} never fires: no date matches its day-of-month and month "
            "(February has no 30th or 31st)"
        ) from None
    return cron


def check_fall_back(fall_back: object) -> str:
    """``fall_back`` if it is ``"twice"`` or ``"once"``."""
    if fall_back not in FALL_BACK:
        raise ValueError(
            f"fall_back must be 'twice' (fire at both instants of a repeated local time) "
            f"or 'once' (the first only), got {quoted(fall_back)}"
        )
    return str(fall_back)


def check_timezone(timezone: object) -> str:
    """``timezone`` if it names an IANA timezone (``Europe/Paris``, ``UTC``)."""
    if not isinstance(timezone, str):
        raise TypeError(f"timezone must be an IANA name like 'Europe/Paris', not {timezone!r}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {timezone!r}: give an IANA name like 'Europe/Paris' or 'UTC'"
        ) from None
    return timezone


def check_every(every: object) -> timedelta:
    """``every`` (a ``timedelta`` or seconds) if it is 1 second (``MIN_EVERY``) to 100 years."""
    if isinstance(every, bool) or not isinstance(every, (timedelta, int, float)):
        raise TypeError(f"every must be a timedelta or seconds, not {type(every).__name__}")
    seconds = every.total_seconds() if isinstance(every, timedelta) else float(every)
    if not (math.isfinite(seconds) and MIN_EVERY.total_seconds() <= seconds <= MAX_SPAN_SECONDS):
        raise ValueError(
            f"every must be 1 second to 100 years (the shortest interval is 1 second), "
            f"got {every!r}"
        )
    return every if isinstance(every, timedelta) else timedelta(seconds=seconds)


def next_fire(spec: ScheduleSpec, after: datetime) -> datetime:
    """The first fire time strictly after ``after``, in UTC."""
    if spec.every_us is not None:
        elapsed = (after - EPOCH) // _MICROSECOND
        return EPOCH + _MICROSECOND * ((elapsed // spec.every_us + 1) * spec.every_us)
    assert spec.cron is not None
    zone = ZoneInfo(spec.timezone)
    found: datetime = croniter(spec.cron, after.astimezone(zone)).get_next(datetime)
    while spec.fall_back == "once" and _repeated(found, zone):
        found = croniter(spec.cron, found).get_next(datetime)
    return found.astimezone(UTC)


def _repeated(moment: datetime, zone: ZoneInfo) -> bool:
    """Whether ``moment`` is the second instant of a local time a fall-back repeats."""
    wall = moment.astimezone(zone).replace(tzinfo=None)
    first = wall.replace(tzinfo=zone, fold=0)
    second = wall.replace(tzinfo=zone, fold=1)
    # in UTC: PEP 495 makes a time in the fold unequal to every time in another zone
    return first.utcoffset() != second.utcoffset() and (
        moment.astimezone(UTC) == second.astimezone(UTC)
    )


def fire_times(
    spec: ScheduleSpec, start: datetime, end: datetime, limit: int | None = None
) -> list[datetime]:
    """Every fire time in ``[start, end)``, oldest first (at most ``limit`` of them)."""
    times: list[datetime] = []
    moment = next_fire(spec, start - _MICROSECOND)
    while moment < end and (limit is None or len(times) < limit):
        times.append(moment)
        moment = next_fire(spec, moment)
    return times
