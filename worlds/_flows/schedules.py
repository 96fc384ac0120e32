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
    if len({fire.record.id for fire in batch}) < len(batch):
        raise ValueError("a fire_schedules batch names each schedule once")
    return batch


async def fire_schedules(rows: Rows, fires: Sequence[ScheduleFire]) -> list[FireOutcome]:
    """See ``World.fire_schedules`` (``fires`` checked).

    The schedules are read (locked) and stored in one statement each way, the
    fires' run ids looked up at once; a schedule whose start raises is undone
    with the whole batch, which then runs again without it (its exception is
    its outcome): rare, so the common batch takes no savepoint per schedule.
    """
    failed: dict[int, Exception] = {}
    while True:
        savepoint = await rows.savepoint()
        try:
            outcomes = await _fire_batch(rows, fires, failed)
        except _Failed as failure:
            await rows.rollback_to(savepoint)
            failed[failure.index] = failure.error
            continue
        await rows.release(savepoint)
        break
    if any(isinstance(outcome, ScheduleRecord) for outcome in outcomes):
        rows.signal(SCHEDULE_TOPIC)
    return outcomes


class _Failed(Exception):  # noqa: N818 - an instruction to the batch
    """Schedule ``index`` of the batch raised ``error``: undo the batch, run it without."""

    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index, self.error = index, error


async def _fire_batch(
    rows: Rows, fires: Sequence[ScheduleFire], failed: dict[int, Exception]
) -> list[FireOutcome]:
    outcomes: list[FireOutcome] = [failed.get(n) for n in range(len(fires))]
    remaining = (n for n in range(len(fires)) if n not in failed)
    order = sorted(remaining, key=lambda n: fires[n].record.id)
    stored = {s.id: s for s in await rows.get_schedules([fires[n].record.id for n in order])}
    # paused, edited or deleted since they were leased: that wins, nothing of them is done
    live = [n for n in order if _unchanged(stored.get(fires[n].record.id), fires[n].record)]
    taken = await rows.existing_runs([r.run_id for n in live for r in _starts(fires[n])])
    states: list[ScheduleRecord] = []
    for n in live:
        try:
            state = await _fire(rows, fires[n], stored[fires[n].record.id], taken)
        except Exception as exc:
            if isinstance(exc, Retry) or _fails_batch(rows, exc):
                raise
            raise _Failed(n, exc) from exc
        outcomes[n] = state
        states.append(state)
    await rows.put_schedules(states)
    return outcomes


def _unchanged(stored: ScheduleRecord | None, leased: ScheduleRecord) -> bool:
    return stored is not None and stored.version == leased.version


async def _fire(
    rows: Rows, fire: ScheduleFire, stored: ScheduleRecord, taken: set[str]
) -> ScheduleRecord:
    buffered_blocked = fire.buffered is not None and await _start(rows, fire.buffered, taken)
    blocked = [await _start(rows, each.request, taken) for each in fire.fires]
    return schedules.fired(stored, fire, buffered_blocked, blocked, rows.now)


async def _start(rows: Rows, request: CreateRunRequest, taken: set[str]) -> bool:
    """Start one fire's run; whether its pair refused it (an open run holds it).

    A fire already started (its run id taken) counts as started: fires are
    found by their run id, never started twice."""
    if request.run_id in taken:
        return False
    if create.refused_before_writes(request):
        try:
            await create.create_in(Tx(rows), request)
        except Rollback as rollback:  # nothing of it was written
            return _refused(rollback)
        except ValueError:
            # its run id taken since the batch looked: a concurrent fire won the race
            # (the failed insert may have spoilt the transaction): the batch again
            raise Retry from None
        taken.add(request.run_id)
        return False
    savepoint = await rows.savepoint()
    try:
        await create.create_in(Tx(rows), request)
    except Rollback as rollback:
        await rows.rollback_to(savepoint)
        return _refused(rollback)
    except ValueError:
        await rows.rollback_to(savepoint)
        if await rows.get_run(request.run_id, lock=False) is None:
            raise
        return False
    await rows.release(savepoint)
    taken.add(request.run_id)
    return False


def _refused(rollback: Rollback) -> bool:
    result = rollback.result
    return isinstance(result, CreateRunResult) and result.conflict is not None


def _fails_batch(rows: Rows, exc: Exception) -> bool:
    return batches.is_world_failure(exc) or rows.fails_transaction(exc)


def _starts(fire: ScheduleFire) -> list[CreateRunRequest]:
    found = [each.request for each in fire.fires]
    return found if fire.buffered is None else [fire.buffered, *found]
