"""``MemoryWorld``: the protocol operations of the memory world (see ``worlds.memory``).

A write runs its flow (``worlds._flows``) over the world's rows
(``worlds.memory.rows``), to the end in one step: nothing in between awaits,
so on one event loop each operation is atomic, and a flow that fails is undone
(``worlds.memory.journal``). Reads look at the stores directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Coroutine,
    Hashable,
    Iterable,
    Sequence,
)
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, TypeVar, cast

import msgspec

from worlds import types
from worlds._flows import (
    archive,
    deployments,
    liveness,
    schedules,
    transactions,
)
from worlds._flows.rows import Rollback
from worlds._flows.stepper import run_sync
from worlds._flows.world import FlowWorld
from worlds._quiet import Quiet, poll_key, wait_idle
from worlds._signals import SignalHub
from worlds.archive import DumpRow
from worlds.errors import WorldMisconfiguredError
from worlds.memory.claims import ClaimStore
from worlds.memory.dump import MemoryLoad, MemorySource
from worlds.memory.hooks import HookStore
from worlds.memory.journal import Journal
from worlds.memory.key_limits import KeyLimitStore
from worlds.memory.rates import RateStore
from worlds.memory.rows import MemoryRows, Tables
from worlds.memory.runs import RunStore
from worlds.memory.schedules import ScheduleStore
from worlds.memory.slot_history import SampleStore
from worlds.memory.slots import SlotStore
from worlds.memory.streams import StreamStore
from worlds.memory.work import WorkQueue
from worlds.protocol import (
    PROTOCOL_VERSION,
    SCHEDULE_TOPIC,
    WORK_TOPIC,
    Isolation,
    OpenTransaction,
)
from worlds.query import CountField, FieldRef, In, RunCount, RunPage, RunQuery
from worlds.query import check as check_filter
from worlds.query import matches as filter_matches
from worlds.semantics import (
    bucket_of,
    check_history_span,
    check_window,
    decode_cursor,
    encode_cursor,
    matches,
    stamped,
)

__all__ = ["MemoryWorld"]

T = TypeVar("T")


class MemoryWorld(FlowWorld[MemoryRows]):
    """A world held in this process's memory; its state is lost with the object."""

    protocol_version = PROTOCOL_VERSION
    gathers_writes = False

    def __init__(
        self,
        url: str = "memory://",
        *,
        clock: Callable[[], datetime] = types.utcnow,
        create: bool = True,
        shared: bool = False,
    ) -> None:
        """A fresh, empty world. ``clock`` (aware UTC) lets tests move time by hand.

        Raises:
            WorldMisconfiguredError: ``create=False`` (a memory world is always
                new, so it never already exists) or ``shared=True`` (it is
                thrown away with this process); use an SQLite or PostgreSQL world.
        """
        if not create or shared:
            need = "an existing world" if not create else "a world that outlives this process"
            raise WorldMisconfiguredError(
                f"{url} is a new, empty world held in this process's memory and thrown "
                f"away when it exits, but {need} is needed here: use sqlite:///path.db "
                "or postgresql://..."
            )
        self.url = url
        self._clock = clock
        self._hub = SignalHub()
        self._quiet = Quiet()
        """Polls that found nothing, answered from memory until a signal of their topic
        or a due time (``worlds._quiet``); only with the host's clock (``_idle_token``)."""
        self._settings: dict[str, str] = {}
        journal = Journal()
        self._tables = Tables(
            journal=journal,
            runs=RunStore(journal),
            work=WorkQueue(journal, self._hub.signal, self._step_started),
            claims=ClaimStore(journal, clock),
            hooks=HookStore(journal),
            slots=SlotStore(journal),
            samples=SampleStore(journal),
            streams=StreamStore(journal),
            schedules=ScheduleStore(journal, clock),
            rates=RateStore(journal),
            key_limits=KeyLimitStore(journal),
        )

    async def _release(self) -> None:
        """Nothing to release: the runs stay, for the next ``async with``."""

    def _reopen(self) -> None:
        """Nothing to open."""

    async def migrate(self) -> int:
        """Nothing to migrate: the memory world has no schema."""
        return 0

    async def info(self) -> dict[str, str | int]:
        """Scheme and run counts."""
        counts: dict[str, str | int] = {"scheme": "memory", "schema_version": 0}
        for record in self._tables.runs:
            key = f"runs.{record.status.value}"
            counts[key] = int(counts.get(key, 0)) + 1
        return counts

    async def setting(self, key: str, value: str | None = None) -> str | None:
        """See ``World.setting``."""
        if value is not None:
            self._settings.setdefault(key, value)
        return self._settings.get(key)

    async def put_setting(self, key: str, value: str | None) -> None:
        """See ``World.put_setting``."""
        if value is None:
            self._settings.pop(key, None)
        else:
            self._settings[key] = value

    # ------------------------------------------------------------ helpers

    async def _run_flow(self, flow: Callable[[MemoryRows], Coroutine[Any, Any, T]]) -> T:
        return self._write(flow)

    def _write(self, flow: Callable[[MemoryRows], Coroutine[Any, Any, T]]) -> T:
        """Run ``flow`` over this world's rows as one atomic operation: undone if it
        fails (or rolls back), its signals delivered once it succeeded."""
        rows, journal = MemoryRows(self._tables, self._clock), self._tables.journal
        try:
            result = run_sync(flow(rows))
        except Rollback as rollback:
            journal.undo_to(0)
            journal.forget()
            return cast(T, rollback.result)
        except BaseException:
            journal.undo_to(0)
            journal.forget()
            raise
        journal.forget()
        for topic in sorted(rows.signals):
            self._hub.signal(topic)
        return result

    def _step_started(self, run_id: str, event: types.StepStarted, now: datetime) -> None:
        """Append the ``StepStarted`` of a step attempt just leased."""
        run = self._tables.runs.get(run_id)
        assert run is not None, "a queued item's run is there"
        record, stored = stamped(run, event, now)
        self._tables.runs.store(record, [stored])

    # ------------------------------------------------------------ archive

    def export_rows(self, run_ids: Sequence[str] | None = None) -> AsyncIterator[DumpRow]:
        """See ``World.export_rows``."""
        return archive.export_rows(MemorySource(self._tables, self._settings), run_ids)

    async def import_rows(self, rows: Sequence[DumpRow]) -> None:
        """See ``World.import_rows``: undone whole if refused."""
        tables, settings = self._tables, self._settings
        self._write(lambda tx: archive.import_rows(tx, MemoryLoad(tx, tables, settings), rows))

    # ------------------------------------------------------------ runs

    async def list_hooks(self, run_id: str | None = None) -> list[types.HookRecord]:
        """See ``World.list_hooks``."""
        return self._tables.hooks.list(run_id)

    async def get_key_limit(self, key: str) -> types.KeyLimit | None:
        """See ``World.get_key_limit``."""
        found = self._tables.key_limits.get(key)
        if found is None:
            return None
        held, _ = self._tables.slots.key_held(key)
        return msgspec.structs.replace(found[0], held=held)

    # ------------------------------------------------------------ streams

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[types.StreamChunk]:
        """See ``World.read_stream``."""
        return self._tables.streams.read(run_id, name, start, limit)

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """See ``World.stream_closed``."""
        return self._tables.streams.is_closed(run_id, name)

    # ------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[types.WorkItem]:
        """See ``World.lease``."""
        poll, token = poll_key(WORK_TOPIC, names), self._idle_token(WORK_TOPIC, names)
        if self._quiet.quiet(poll, token):
            return []  # nothing was due, nothing signalled since, nothing due yet
        work, now = self._tables.work, self._clock()
        rights = self._write(
            lambda rows: liveness.lease_rights(rows, worker_id, work.expired_owners(now, names))
        )
        if rights is None:  # fenced: declared dead, it leases nothing
            return []
        runs, builds = self._tables.runs, rights.builds

        def runnable(run_id: str) -> bool:
            run = runs.get(run_id)
            return run is None or builds.may_run(run.build_id, run.pin)

        leased = work.lease(
            worker_id,
            now,
            names=names,
            limit=limit,
            lease_seconds=lease_seconds,
            takeable=rights.may_take,
            runnable=runnable,
        )
        self._tables.journal.forget()  # the StepStarted appended: nothing to undo
        taken = {item.run_id for item in leased if item.kind == "workflow"}
        self._write(lambda rows: deployments.record_builds(rows, builds, taken))
        if leased:
            self._quiet.forget(poll)
        else:
            self._quiet.found(poll, token, _seconds(work.leasable_at(names), now))
        return leased

    async def renew_leases(
        self, worker_id: str, items: Sequence[types.WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        return self._tables.work.renew(worker_id, items, lease_seconds, self._clock())

    async def release(self, worker_id: str, items: Sequence[types.WorkItem]) -> None:
        """See ``World.release``."""
        self._tables.work.release(worker_id, items)

    # ------------------------------------------------------------ liveness

    async def list_workers(self) -> list[types.WorkerRecord]:
        """See ``World.list_workers``."""
        return liveness.listing(list(self._tables.workers.values()), self._clock())

    async def list_deployments(self) -> list[types.DeploymentRecord]:
        """See ``World.list_deployments``."""
        counts: dict[tuple[str, types.Pin | None], int] = {}
        for run in self._tables.runs:
            if run.build_id is not None and not run.status.is_closed:
                group = (run.build_id, run.pin)
                counts[group] = counts.get(group, 0) + 1
        return deployments.listing(
            list(self._tables.deployments.values()),
            list(self._tables.workers.values()),
            [deployments.OpenRuns(build, pin, runs) for (build, pin), runs in counts.items()],
        )

    def now(self) -> datetime:
        """See ``World.now``: the clock this world was given."""
        return self._clock()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``."""
        await self._hub.wait(topic, timeout)

    async def wait_idle(self, topic: str, names: Collection[str], timeout: float) -> None:
        """See ``World.wait_idle``: until a signal of ``topic`` or a due time."""
        await wait_idle(
            self._quiet,
            topic,
            names,
            lambda: self._idle_token(topic, names),
            lambda seconds: self.wait(topic, seconds),
            timeout,
        )

    def _idle_token(self, topic: str, names: Collection[str] = ()) -> Hashable | None:
        """The change token of a poll of ``topic`` for ``names``: its signals, since every
        write here signals what it makes due. ``None`` (no memory) under a clock moved
        by hand: due times on it say nothing about when to look again."""
        return self._hub.heard(topic, names) if self._clock is types.utcnow else None

    # What a test clock that moves by hand (``workflow.testing``) needs: when nothing
    # is ``busy``, moving the clock to ``next_due`` is the only way anything happens.

    def next_due(self) -> datetime | None:
        """When the earliest work item nobody holds becomes due; ``None`` if none waits."""
        return self._tables.work.next_due()

    def next_schedule_wake(self, workflows: Collection[str]) -> datetime | None:
        """When the earliest unpaused schedule of one of ``workflows`` wakes; ``None`` if none."""
        return self._tables.schedules.next_wake(workflows)

    def busy(self, workflows: Collection[str] = ()) -> bool:
        """True while some work item is due now or leased (a worker is on it), or a
        schedule of one of ``workflows`` is due or leased."""
        return self._tables.work.busy(self._clock()) or self._tables.schedules.busy(workflows)

    def waiting_runs(self) -> dict[str, set[str]]:
        """Runs with a workflow task or timer due now that no worker holds, by workflow."""
        return self._tables.work.waiting_runs(self._clock())

    def scheduled_workflows(self) -> frozenset[str]:
        """The workflows the unpaused schedules start."""
        return self._tables.schedules.workflows()

    def clock_moved(self) -> None:
        """Wake the workers: the clock was moved by hand, so work or schedules may be due."""
        self._hub.signal(WORK_TOPIC)
        self._hub.signal(SCHEDULE_TOPIC)

    # ------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> types.RunRecord | None:
        """See ``World.get_run``."""
        return self._tables.runs.get(run_id)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        """See ``World.read_events``."""
        return self._tables.runs.events(run_id, after_seq)

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``."""
        if query.limit < 1:
            raise ValueError(f"limit must be >= 1, got {query.limit}")
        after = decode_cursor(query.cursor) if query.cursor else None
        where = query.where
        if where is not None:
            check_filter(where)
        found: list[types.RunRecord] = []
        # newest first from the cursor on: a page reads the runs it passes, not all
        candidates: Iterable[types.RunRecord] = self._tables.runs.newest_first(after)
        if isinstance(where, In) and where.left == FieldRef("id"):
            # runs named by id (Run.result's shared reader): look them up, do not scan
            named = (self._tables.runs.get(str(run_id)) for run_id in set(where.values))
            candidates = sorted(
                (r for r in named if r is not None and (after is None or r.id < after)),
                key=lambda record: record.id,
                reverse=True,
            )
            where = None  # every candidate matches it
        for record in candidates:
            if matches(record, query) and (where is None or filter_matches(record, where)):
                found.append(record)
                if len(found) > query.limit:
                    break
        more = len(found) > query.limit
        page = tuple(found[: query.limit])
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: types.AttributeValue) -> types.Claim | None:
        """See ``World.find_claim``."""
        return self._tables.claims.find(key, value)

    async def list_slots(self, key: str, value: types.AttributeValue) -> list[types.Slot]:
        """See ``World.list_slots``."""
        return self._tables.slots.at_pair(key, value)

    async def run_slots(self, run_id: str) -> list[types.Slot]:
        """See ``World.run_slots``."""
        return self._tables.slots.of_run(run_id)

    async def list_key_slots(self, key: str, limit: int = 1000) -> list[types.Slot]:
        """See ``World.list_key_slots``."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        return self._tables.slots.of_key(key, limit)

    async def slot_history(
        self, key: str, since: datetime, until: datetime, width: int = 60
    ) -> list[types.SlotSample]:
        """See ``World.slot_history``."""
        check_history_span(since, until, width)
        return self._tables.samples.history(key, since, until, width)

    async def count_runs(
        self, query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
    ) -> list[RunCount]:
        """See ``World.count_runs``: a scan of every run (a memory world is small)."""
        check_window(since, until, width)
        where = query.where
        if where is not None:
            check_filter(where)
        counts: Counter[tuple[int, types.RunStatus]] = Counter()
        for record in self._tables.runs:
            moment = record.created_at if field == "created" else record.closed_at
            if moment is None or not since <= moment < until or not matches(record, query):
                continue
            if where is None or filter_matches(record, where):
                counts[(bucket_of(moment, since, width), record.status)] += 1
        return [
            RunCount(bucket=bucket, status=status, count=count)
            for (bucket, status), count in sorted(counts.items())
        ]

    async def run_claims(self, run_id: str) -> list[types.Claim]:
        """See ``World.run_claims``."""
        return self._tables.claims.of_run(run_id)

    # ------------------------------------------------------------ retention

    # ------------------------------------------------------------ schedules

    async def create_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord:
        """See ``World.create_schedule``."""
        schedules.check(record)
        return self._write(lambda rows: schedules.create_schedule(rows, record))

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return self._tables.schedules.get(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[types.ScheduleRecord]:
        """See ``World.list_schedules``."""
        return self._tables.schedules.list(after=after, limit=limit)

    async def update_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord | None:
        """See ``World.update_schedule``."""
        schedules.check(record)
        return self._write(lambda rows: schedules.update_schedule(rows, record))

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        return self._tables.schedules.delete(schedule_id)

    async def fire_schedules(
        self, fires: Sequence[types.ScheduleFire]
    ) -> list[types.ScheduleRecord | Exception | None]:
        """See ``World.fire_schedules``: the whole batch at once."""
        batch = schedules.check_fires(fires)
        return self._write(lambda rows: schedules.fire_schedules(rows, batch))

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> types.ScheduleLease:
        """See ``World.lease_schedules``."""
        poll, token = poll_key(SCHEDULE_TOPIC, names), self._idle_token(SCHEDULE_TOPIC)
        if self._quiet.quiet(poll, token):
            return types.ScheduleLease(now=self._clock(), next_wake_at=self._quiet.remembered(poll))
        store = self._tables.schedules
        lease = store.lease(worker_id, names=names, limit=limit, lease_seconds=lease_seconds)
        if lease.schedules:
            self._quiet.forget(poll)
        else:
            ends = store.leases_end(names, lease.now)
            look_at = min((t for t in (lease.next_wake_at, ends) if t is not None), default=None)
            self._quiet.found(poll, token, _seconds(look_at, lease.now), lease.next_wake_at)
        return lease

    # ------------------------------------------------------------------ transactions

    def transaction(
        self, lease: types.WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AbstractAsyncContextManager[OpenTransaction]:
        """Refused: the memory world keeps no database (``TransactionsUnsupportedError``)."""
        raise transactions.unsupported("the memory world")


def _seconds(at: datetime | None, now: datetime) -> float | None:
    """Seconds from ``now`` until ``at`` (``None``: never)."""
    return None if at is None else (at - now).total_seconds()
