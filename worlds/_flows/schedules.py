"""Storing schedules: ``World.create_schedule``, ``update_schedule`` and ``fire_schedules``,
for every backend.

A new schedule is stored at version 1; an update is a compare-and-set on
``version`` that writes only the mutable fields, one version on, releases the
schedule's lease, and signals ``SCHEDULE_TOPIC`` (``worlds._rules.schedules``).
A batch of fires is one transaction: each schedule, in id order, in a
savepoint of its own (compare-and-set, its fires started by the create flow,
its new state), each fire in a nested one, so a fire refused by its pair or
already started leaves no trace and the others stand.
"""

from __future__ import annotations

from collections.abc import Sequence

from worlds._flows import create
from worlds._flows.rows import Retry, Rollback, Rows
from worlds._flows.tx import Tx
from worlds._rules import batches, schedules
from worlds.protocol import SCHEDULE_TOPIC
from worlds.types import CreateRunRequest, CreateRunResult, ScheduleFire, ScheduleRecord

__all__ = ["check", "check_fires", "create_schedule", "fire_schedules", "update_schedule"]

FireOutcome = ScheduleRecord | Exception | None
"""One schedule's outcome in ``fire_schedules``: its new state, ``None`` (it changed
since it was leased: nothing done), or the exception one of its fires raised."""


def check(record: ScheduleRecord) -> None:
    """Raise ``ValueError`` if ``record`` cannot be stored (before any transaction)."""
    schedules.check_schedule(record)


async def create_schedule(rows: Rows, record: ScheduleRecord) -> ScheduleRecord:
    """See ``World.create_schedule`` (``record`` checked)."""
    stored = schedules.created(record, rows.now)
    if not await rows.insert_schedule(stored):
        raise schedules.schedule_exists(record.id)
    rows.signal(SCHEDULE_TOPIC)
    return stored


async def update_schedule(rows: Rows, record: ScheduleRecord) -> ScheduleRecord | None:
    """See ``World.update_schedule`` (``record`` checked)."""
    stored = await rows.get_schedule(record.id)
    if stored is None or stored.version != record.version:
        return None
    new = schedules.updated(stored, record, rows.now)
    await rows.put_schedule(new)
    rows.signal(SCHEDULE_TOPIC)
    return new


def check_fires(fires: Sequence[ScheduleFire]) -> list[ScheduleFire]:
    """The batch of ``fire_schedules`` as a list, every start in it checked (``ValueError``
    or ``TypeError`` before any transaction: nothing written)."""
    batch = list(fires)
    for fire in batch:
        if not isinstance(fire, ScheduleFire):
            raise TypeError(f"fire_schedules takes ScheduleFire entries, not {fire!r}")
        for request in _starts(fire):
            create.check(request)
    return batch


async def fire_schedules(rows: Rows, fires: Sequence[ScheduleFire]) -> list[FireOutcome]:
    """See ``World.fire_schedules`` (``fires`` checked)."""
    outcomes: list[FireOutcome] = [None] * len(fires)
    for n in sorted(range(len(fires)), key=lambda n: fires[n].record.id):
        savepoint = await rows.savepoint()
        try:
            outcomes[n] = await _fire(rows, fires[n])
        except Exception as exc:
            if (
                isinstance(exc, Retry)
                or batches.is_world_failure(exc)
                or rows.fails_transaction(exc)
            ):
                raise
            await rows.rollback_to(savepoint)
            outcomes[n] = exc
            continue
        await rows.release(savepoint)
    if any(isinstance(outcome, ScheduleRecord) for outcome in outcomes):
        rows.signal(SCHEDULE_TOPIC)
    return outcomes


async def _fire(rows: Rows, fire: ScheduleFire) -> ScheduleRecord | None:
    stored = await rows.get_schedule(fire.record.id)
    if stored is None or stored.version != fire.record.version:
        return None  # paused, edited or deleted since it was leased: that wins
    buffered_blocked = fire.buffered is not None and await _start(rows, fire.buffered)
    blocked = [await _start(rows, each.request) for each in fire.fires]
    new = schedules.fired(stored, fire, buffered_blocked, blocked, rows.now)
    await rows.put_schedule(new)
    return new


async def _start(rows: Rows, request: CreateRunRequest) -> bool:
    """Start one fire's run; whether its pair refused it (an open run holds it).

    A fire already started (its run id taken) counts as started: fires are
    found by their run id, never started twice."""
    savepoint = await rows.savepoint()
    try:
        await create.create_in(Tx(rows), request)
    except Rollback as rollback:
        await rows.rollback_to(savepoint)
        result = rollback.result
        return isinstance(result, CreateRunResult) and result.conflict is not None
    except ValueError:
        await rows.rollback_to(savepoint)
        if await rows.get_run(request.run_id, lock=False) is None:
            raise
        return False
    await rows.release(savepoint)
    return False


def _starts(fire: ScheduleFire) -> list[CreateRunRequest]:
    found = [each.request for each in fire.fires]
    return found if fire.buffered is None else [fire.buffered, *found]
