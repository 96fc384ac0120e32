"""Schedules: start a workflow on a cron expression or every fixed interval.

::

    from workflow.schedules import Overlap, create_schedule, get_schedule, list_schedules

    sched = await create_schedule(
        report, "eu", id="daily-report", cron="0 3 * * *", timezone="Europe/Paris",
        overlap=Overlap.SKIP, catchup_window=timedelta(hours=1), world=world,
    )

Workers fire schedules (no extra daemon): a schedule wakes one worker that
runs its workflow at each fire time, the way a durable timer does. Each fire
is a start that claims its fire time once, so however many workers run, a
fire time starts at most one run; every run a schedule starts carries
``$schedule=<id>`` and ``$scheduled_at=<fire time>``. The overlap rule is a
start policy on the schedule's unique pair, ``$schedule=<id>`` or the
business pair ``key=``/``value=`` it shares with ordinary starts (see
``rfcs/0009-schedules.md``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import msgspec

from workflow._attributes import SCHEDULE_KEY, check_pair, split_start_attributes
from workflow._codec import encode_start
from workflow._schedule_fire import BUFFER_RECHECK, start_fire
from workflow._schedule_spec import (
    MIN_CATCHUP,
    Overlap,
    ScheduleSpec,
    check_cron,
    check_every,
    check_fall_back,
    check_timezone,
    decode_spec,
    encode_spec,
    fire_times,
    next_fire,
)
from workflow.client import Run, resolve_world
from workflow.decorators import WorkflowDefinition
from workflow.errors import ScheduleExistsError, ScheduleNotFoundError
from worlds._rules.schedules import SCHEDULE_ID
from worlds.protocol import World
from worlds.query import RunQuery
from worlds.quoting import quoted
from worlds.types import AttributeValue, ScheduleRecord

__all__ = [
    "Overlap",
    "Schedule",
    "ScheduleExistsError",
    "ScheduleInfo",
    "ScheduleNotFoundError",
    "create_schedule",
    "get_schedule",
    "list_schedules",
]

DEFAULT_CATCHUP = timedelta(minutes=1)
"""The default ``catchup_window``: fires missed by more than a minute are not run."""

MAX_BACKFILL = 10_000
"""Most fire times one ``backfill`` call may start."""

_RECENT_RUNS = 10


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """What ``Schedule.describe()`` (and ``Schedule.info`` from ``list_schedules``) report.

    ``next_fire_times`` are the next few fire times (UTC) not yet handled;
    ``buffered_at`` is a fire waiting behind an open run (``BUFFER_ONE``);
    ``recent_run_ids`` the newest runs it started, newest first (empty in
    ``list_schedules``, which reads no runs).
    """

    id: str
    workflow: str
    cron: str | None
    timezone: str | None
    every: timedelta | None
    overlap: Overlap
    catchup_window: timedelta
    attributes: dict[str, AttributeValue]
    key: str | None
    value: AttributeValue
    paused: bool
    note: str | None
    next_fire_times: list[datetime]
    buffered_at: datetime | None
    recent_run_ids: list[str]
    created_at: datetime
    updated_at: datetime
    fall_back: str = "twice"


def _info(record: ScheduleRecord, recent: list[str], count: int = 5) -> ScheduleInfo:
    spec = decode_spec(record.spec)
    upcoming: list[datetime] = []
    moment = record.next_fire_at
    while moment is not None and len(upcoming) < count:
        upcoming.append(moment)
        moment = next_fire(spec, moment)
    return ScheduleInfo(
        id=record.id,
        workflow=record.workflow,
        cron=spec.cron,
        timezone=spec.timezone if spec.cron is not None else None,
        every=spec.every,
        overlap=spec.overlap,
        catchup_window=spec.catchup_window,
        attributes=dict(spec.attributes),
        key=spec.key,
        value=spec.value,
        paused=record.paused,
        note=record.note,
        next_fire_times=upcoming,
        buffered_at=record.buffered_at,
        recent_run_ids=recent,
        created_at=record.created_at,
        updated_at=record.updated_at,
        fall_back=spec.fall_back,
    )


class Schedule:
    """A handle on a schedule; building one does no I/O (``get_schedule``).

    Every operation raises ``ScheduleNotFoundError`` when the world has no
    schedule with this id.
    """

    def __init__(
        self, schedule_id: str, *, world: World | None = None, info: ScheduleInfo | None = None
    ) -> None:
        self._id = schedule_id
        self._world = world
        self._info = info

    @property
    def id(self) -> str:
        """The schedule's id."""
        return self._id

    @property
    def info(self) -> ScheduleInfo | None:
        """The schedule as ``list_schedules`` read it (``None`` on other handles).

        A snapshot without recent runs; ``describe()`` reads the current state.
        """
        return self._info

    @property
    def world(self) -> World:
        """The world the schedule lives in."""
        return resolve_world(self._world)

    def __repr__(self) -> str:
        return f"Schedule({self._id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and other._id == self._id

    def __hash__(self) -> int:
        return hash(("schedule", self._id))

    async def _record(self) -> ScheduleRecord:
        record = await self.world.get_schedule(self._id)
        if record is None:
            raise ScheduleNotFoundError(self._id)
        return record

    async def _change(self, **fields: Any) -> ScheduleRecord:
        """Write ``fields`` over the stored schedule, again if a concurrent write won."""
        while True:
            record = await self._record()
            stored = await self.world.update_schedule(msgspec.structs.replace(record, **fields))
            if stored is not None:
                return stored

    async def pause(self, note: str | None = None) -> None:
        """Stop firing until ``unpause()``; ``note`` says why (shown by ``describe``)."""
        await self._change(paused=True, note=_check_note(note))

    async def unpause(self, note: str | None = None) -> None:
        """Fire again. Fires missed while paused run only if within the catchup window."""
        await self._change(paused=False, note=_check_note(note))

    async def trigger(self) -> Run[Any] | None:
        """Fire now, under the schedule's overlap rule (also while paused).

        Returns the run started, or ``None`` when the overlap rule refused
        (``SKIP``) or buffered (``BUFFER_ONE``) the fire because a run is open.
        """
        record = await self._record()
        spec = decode_spec(record.spec)
        at = self.world.now()
        fired = await start_fire(self.world, record, spec, at, spec.overlap)
        if fired.blocked_by is not None and spec.overlap is Overlap.BUFFER_ONE:
            await self._buffer(at)
        return None if fired.run_id is None else Run(fired.run_id, world=self._world)

    async def _buffer(self, at: datetime) -> None:
        while True:
            record = await self._record()
            if record.buffered_at is not None:
                return
            recheck = at + BUFFER_RECHECK
            wake = recheck if record.wake_at is None else min(record.wake_at, recheck)
            state = msgspec.structs.replace(record, buffered_at=at, wake_at=wake)
            if await self.world.update_schedule(state) is not None:
                return

    async def backfill(
        self, start: datetime, end: datetime, *, overlap: Overlap = Overlap.ALLOW_ALL
    ) -> list[Run[Any]]:
        """Fire every fire time in ``[start, end)``, oldest first; the runs they have.

        Each fire is claimed once, so a backfill repeated (or overlapping the
        worker's own fires) starts nothing twice. By default every fire time
        starts a run (``ALLOW_ALL``: no pair is claimed); pass the schedule's
        rule (``overlap=Overlap.SKIP``, ``CANCEL_OTHER``) to apply it to each
        fire in turn (``BUFFER_ONE`` acts as ``SKIP``: a backfill waits for
        nothing).

        Raises:
            ValueError: naive datetimes, ``start >= end``, or more than
                ``MAX_BACKFILL`` fire times; nothing was started.
        """
        for name, moment in (("start", start), ("end", end)):
            if not isinstance(moment, datetime) or moment.utcoffset() is None:
                raise ValueError(f"backfill {name} must be an aware datetime, got {quoted(moment)}")
        if not start < end:
            raise ValueError(f"backfill needs start < end, got {start} and {end}")
        if not isinstance(overlap, Overlap):
            raise TypeError(f"overlap must be an Overlap, not {quoted(overlap)}")
        record = await self._record()
        spec = decode_spec(record.spec)
        rule = Overlap.SKIP if overlap is Overlap.BUFFER_ONE else overlap
        times = fire_times(spec, start, end, limit=MAX_BACKFILL + 1)
        if len(times) > MAX_BACKFILL:
            raise ValueError(
                f"backfill covers more than {MAX_BACKFILL} fire times; split the range"
            )
        runs: list[Run[Any]] = []
        for at in times:
            fired = await start_fire(self.world, record, spec, at, rule)
            if fired.run_id is not None:
                runs.append(Run(fired.run_id, world=self._world))
        return runs

    async def describe(self) -> ScheduleInfo:
        """Paused or not, the note, the next fire times and the newest runs it started."""
        record = await self._record()
        page = await self.world.list_runs(
            RunQuery(attributes={SCHEDULE_KEY: self._id}, limit=_RECENT_RUNS)
        )
        return _info(record, [run.id for run in page.runs])

    async def delete(self) -> None:
        """Delete the schedule; the runs it started stay."""
        if not await self.world.delete_schedule(self._id):
            raise ScheduleNotFoundError(self._id)


def _check_note(note: object) -> str | None:
    if note is None:
        return None
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__}")
    if len(note) > 1000:
        raise ValueError(f"note must be at most 1000 characters, got {len(note)}")
    return note


def _check_id(schedule_id: object) -> str:
    if not isinstance(schedule_id, str) or not SCHEDULE_ID.fullmatch(schedule_id):
        raise ValueError(
            f"schedule id {quoted(schedule_id)} must be 1-191 characters of letters, digits, "
            "'.', '_', '-', ':'"
        )
    return schedule_id


def _spec(
    fn: WorkflowDefinition[..., Any],
    args: tuple[Any, ...],
    cron: str | None,
    timezone: str | None,
    every: timedelta | float | None,
    overlap: Overlap,
    catchup_window: timedelta,
    attributes: Mapping[str, Any] | None,
    key: str | None,
    value: AttributeValue,
    fall_back: str = "twice",
) -> ScheduleSpec:
    """Check every argument of ``create_schedule``; the spec to store."""
    if (cron is None) == (every is None):
        raise ValueError("give exactly one of cron= (with timezone=) and every=")
    fall_back = check_fall_back(fall_back)
    every_us = None
    if every is not None:
        if timezone is not None:
            raise ValueError("timezone= applies to cron schedules; every= counts UTC time")
        if fall_back != "twice":
            raise ValueError("fall_back= applies to cron schedules; every= counts UTC time")
        every_us = check_every(every) // timedelta(microseconds=1)
    else:
        cron = check_cron(cron)
    zone = check_timezone("UTC" if timezone is None else timezone)
    if not isinstance(overlap, Overlap):
        raise TypeError(f"overlap must be an Overlap (Overlap.SKIP, ...), not {quoted(overlap)}")
    if not isinstance(catchup_window, timedelta):
        raise TypeError(f"catchup_window must be a timedelta, not {quoted(catchup_window)}")
    if catchup_window < timedelta(0):
        raise ValueError(f"catchup_window cannot be negative, got {catchup_window}")
    values, unique, limits, _ = split_start_attributes(attributes)
    if limits:
        raise ValueError(
            f"a schedule's attributes cannot be Limited ({sorted(limits)}): its overlap "
            "rule decides whether a fire starts"
        )
    if unique:
        raise ValueError(
            f"a schedule's attributes cannot be unique ({sorted(unique)}): every fire "
            "would conflict with the last; share a unique pair with key= and value="
        )
    if (key is None) != (value is None):
        raise ValueError("give key= and value= together (the shared unique pair), or neither")
    if key is not None:
        key, value = check_pair(key, value)
        if key.startswith("$"):
            raise ValueError(f"the shared pair's key cannot be reserved, got {quoted(key)}")
        if key in values:
            raise ValueError(f"key {quoted(key)} is also among the attributes; give it once")
    if len(values) + 3 > 64:
        raise ValueError("a schedule's runs have at most 64 attributes, with the 3 it adds")
    return ScheduleSpec(
        args=encode_start(fn, args),
        cron=cron,
        timezone=zone,
        every_us=every_us,
        overlap=overlap,
        catchup_us=max(catchup_window, MIN_CATCHUP) // timedelta(microseconds=1),
        attributes=values,
        key=key,
        value=value,
        fall_back=fall_back,
    )


async def create_schedule(
    fn: WorkflowDefinition[..., Any],
    *args: Any,
    id: str,  # noqa: A002 - the name the API contract gives it
    cron: str | None = None,
    timezone: str | None = None,
    every: timedelta | float | None = None,
    overlap: Overlap = Overlap.SKIP,
    catchup_window: timedelta = DEFAULT_CATCHUP,
    attributes: Mapping[str, Any] | None = None,
    key: str | None = None,
    value: AttributeValue = None,
    paused: bool = False,
    note: str | None = None,
    world: World | None = None,
    fall_back: str = "twice",
) -> Schedule:
    """Create schedule ``id`` that starts ``fn(*args)`` at each fire time.

    Args:
        fn: the ``@workflow`` to start; workers that run it fire the schedule.
        args: its arguments, encoded now like ``start``'s.
        id: 1-191 characters of letters, digits, ``.``, ``_``, ``-``, ``:``,
            unique in the world.
        cron: a 5-field cron expression, read in ``timezone`` (default UTC);
            one that matches no date (``0 0 30 2 *``) is refused. A local time
            skipped by a spring-forward fires at the first instant after the gap.
        every: or a fixed interval (a ``timedelta`` or seconds), 1 second to
            100 years; fire times are its multiples since the Unix epoch.
        overlap: what a fire does while the last run (or the holder of the
            shared pair) is open.
        catchup_window: fires missed (no worker ran, or paused) run if at
            most this old; older ones are passed over. A window under one
            second counts as one second, so a fire handled a moment late runs.
        attributes: put on every run it starts (not unique: use key/value).
        key: the key of a unique business pair the schedule's runs claim,
            shared with ordinary starts (``start_with_policy(key=, value=)``),
            so the overlap rule also covers them.
        value: that pair's value.
        paused: create it paused (``note`` says why).
        world: the world; default the configured one.
        fall_back: for a cron schedule, a local time a daylight-saving
            fall-back repeats (``30 2 * * *`` in ``Europe/Paris`` on the last
            Sunday of October): ``"twice"`` (the default) fires at both
            instants, ``"once"`` at the first only.

    Raises:
        ScheduleExistsError: ``id`` is taken (a ``ValueError``); nothing written.
        TypeError / ValueError: bad input (a cron that never fires, an unknown
            timezone, every under 1 second or not finite, both cron and every,
            ...); nothing written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"create_schedule() needs a @workflow function, got {quoted(fn)}")
    schedule_id = _check_id(id)
    spec = _spec(
        fn, args, cron, timezone, every, overlap, catchup_window, attributes, key, value, fall_back
    )
    if not isinstance(paused, bool):
        raise TypeError(f"paused must be a bool, not {quoted(paused)}")
    target = resolve_world(world)
    first = next_fire(spec, target.now())  # the world's clock, which a test may move
    record = ScheduleRecord(
        id=schedule_id,
        workflow=fn.name,
        spec=encode_spec(spec),
        paused=paused,
        note=_check_note(note),
        next_fire_at=first,
        wake_at=first,
    )
    try:
        await target.create_schedule(record)
    except ValueError:
        if await target.get_schedule(schedule_id) is not None:
            raise ScheduleExistsError(schedule_id) from None
        raise
    return Schedule(schedule_id, world=world)


def get_schedule(schedule_id: str, *, world: World | None = None) -> Schedule:
    """A handle on schedule ``schedule_id``, without I/O (it may not exist)."""
    return Schedule(_check_id(schedule_id), world=world)


async def list_schedules(*, world: World | None = None) -> AsyncIterator[Schedule]:
    """Every schedule of the world, in id order: handles whose ``info`` is as read."""
    target = resolve_world(world)
    after: str | None = None
    while True:
        page = await target.list_schedules(after=after, limit=100)
        for record in page:
            yield Schedule(record.id, world=world, info=_info(record, []))
        if len(page) < 100:
            return
        after = page[-1].id
