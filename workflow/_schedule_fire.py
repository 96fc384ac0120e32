"""Firing a schedule: each fire is a start that claims its fire time once.

A fire's run id is derived from (schedule id, fire time), so creating the
same fire twice is refused by the world as a duplicate run id: two workers,
a worker restarted mid-fire, or a trigger racing a worker never start one fire
twice. The overlap rule is a start policy on the schedule's unique pair
(``$schedule=<id>``, or the shared business pair): ``SKIP`` and
``BUFFER_ONE`` refuse to take it from an open holder, ``CANCEL_OTHER`` takes
it over atomically (cancelling the holder), ``ALLOW_ALL`` claims nothing.
The worker (``workflow.engine``) plans each leased schedule's round
(``plan_round``) and hands a batch of rounds to ``World.fire_schedules``: one
transaction for every due fire of the batch. ``Schedule.trigger`` and
``backfill`` start one fire at a time (``start_fire``).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import NamedTuple

from workflow._attributes import SCHEDULE_KEY, SCHEDULED_AT_KEY
from workflow._schedule_spec import Overlap, ScheduleSpec, decode_spec, next_fire
from worlds.codec import check_plain_write
from worlds.protocol import World
from worlds.types import (
    EPOCH,
    AttributeValue,
    ConflictRule,
    CreateRunRequest,
    Limit,
    ScheduleFire,
    ScheduleFireTime,
    ScheduleRecord,
    StartPolicy,
)

__all__ = [
    "BUFFER_RECHECK",
    "MAX_FIRES_PER_ROUND",
    "Fired",
    "fire_request",
    "fire_run_id",
    "plan_round",
    "start_fire",
]

BUFFER_RECHECK = timedelta(seconds=1)
"""How often a worker looks whether the run a buffered fire waits behind has closed."""

MAX_FIRES_PER_ROUND = 100
"""Fire times one lease of a schedule handles at most; the rest wait for the next lease."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_MILLISECOND = timedelta(milliseconds=1)
_MICROSECOND = timedelta(microseconds=1)


def fire_run_id(schedule_id: str, at: datetime) -> str:
    """The run id of the fire of ``schedule_id`` at ``at``: the same for every caller.

    Shaped like every run id (26 characters, a ULID): the fire time's
    milliseconds, then 80 bits of a hash of the schedule id and the exact fire
    time, so runs sort by fire time and no two fires share an id.
    """
    millis = max((at - EPOCH) // _MILLISECOND, 0)
    micros = (at - EPOCH) // _MICROSECOND
    digest = hashlib.blake2b(f"{schedule_id}\x00{micros}".encode(), digest_size=10).digest()
    number = (millis << 80) | int.from_bytes(digest, "big")
    chars = []
    for _ in range(26):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


class Fired(NamedTuple):
    """What one fire did.

    ``run_id`` is the fire's run (started by this call when ``started``, or
    by an earlier one), or ``None`` when the overlap rule refused it because
    run ``blocked_by`` holds the pair and is open.
    """

    run_id: str | None
    started: bool
    blocked_by: str | None = None


def fire_request(
    record: ScheduleRecord, spec: ScheduleSpec, at: datetime, overlap: Overlap
) -> CreateRunRequest:
    """The start of the fire of ``record`` at ``at`` under ``overlap``."""
    run_id = fire_run_id(record.id, at)
    attributes: dict[str, AttributeValue] = dict(spec.attributes)
    attributes[SCHEDULE_KEY] = record.id
    attributes[SCHEDULED_AT_KEY] = at
    unique: frozenset[str] = frozenset()
    policy = None
    limits: dict[str, Limit] = {}
    if overlap is Overlap.BUFFER_ALL:
        # every fire waits in line for the one slot of the schedule's pair: the world
        # promotes the waiters first in first out, so they run one at a time, in order
        attributes[SCHEDULE_KEY] = record.id
        limits = {SCHEDULE_KEY: Limit(limit=1, on_full="queue")}
    elif overlap is not Overlap.ALLOW_ALL:
        key, value = (SCHEDULE_KEY, record.id) if spec.key is None else (spec.key, spec.value)
        attributes[key] = value
        unique = frozenset({key})
        conflict: ConflictRule = "terminate_existing" if overlap is Overlap.CANCEL_OTHER else "fail"
        policy = StartPolicy(key=key, conflict=conflict, reuse="allow_duplicate")
    return CreateRunRequest(
        run_id=run_id,
        workflow=record.workflow,
        args=spec.args,
        attributes=attributes,
        unique=unique,
        policy=policy,
        limits=limits,
    )


async def start_fire(
    world: World, record: ScheduleRecord, spec: ScheduleSpec, at: datetime, overlap: Overlap
) -> Fired:
    """Start the fire of ``record`` at ``at`` under ``overlap``, at most once ever."""
    request = fire_request(record, spec, at, overlap)
    run_id = request.run_id
    await check_plain_write(world)  # the run's arguments are payloads
    try:
        created = await world.create_run(request)
    except ValueError:
        if await world.get_run(run_id) is not None:  # another caller fired it first
            return Fired(run_id, started=False)
        raise
    if created.conflict is not None:
        return Fired(None, started=False, blocked_by=created.conflict.holder_run_id)
    return Fired(run_id, started=True)


def plan_round(record: ScheduleRecord, now: datetime) -> ScheduleFire:
    """The round of ``record`` due by ``now`` (the world's clock), for ``World.fire_schedules``.

    A buffered fire goes first. Fire times older than the catchup window are
    passed over (missed); each other one, up to ``MAX_FIRES_PER_ROUND``, is
    started under the schedule's overlap rule; the next one not handled is
    the schedule's next fire. The world stores the round over the version
    read, so a concurrent pause or edit wins and this round is dropped.
    """
    spec = decode_spec(record.spec)
    buffered = None
    if record.buffered_at is not None:
        buffered = fire_request(record, spec, record.buffered_at, Overlap.BUFFER_ONE)
    moment = record.next_fire_at
    oldest = now - spec.catchup_window
    if moment is not None and moment < oldest:
        moment = next_fire(spec, oldest - _MICROSECOND)
    fires: list[ScheduleFireTime] = []
    while moment is not None and moment <= now and len(fires) < MAX_FIRES_PER_ROUND:
        fires.append(
            ScheduleFireTime(at=moment, request=fire_request(record, spec, moment, spec.overlap))
        )
        moment = next_fire(spec, moment)
    return ScheduleFire(
        record=record,
        fires=tuple(fires),
        buffered=buffered,
        buffer=spec.overlap is Overlap.BUFFER_ONE,
        next_fire_at=moment,
        recheck_at=now + BUFFER_RECHECK,
    )
