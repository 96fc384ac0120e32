"""The protocol operations of the SQLite world: writes are flows, reads are queries.

Each operation is one function over the connection (``worlds.sqlite.connection``).
A write runs its flow (``worlds._flows``) over the transaction's rows
(``worlds.sqlite.rows.SqliteRows``), synchronously: the rows never wait, so
the flow finishes in one step (``run_sync``) inside the write transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, TypeVar

import msgspec

from worlds import types
from worlds._columns import key_limit
from worlds._flows import (
    archive,
    deployments,
    liveness,
)
from worlds._flows.stepper import run_sync
from worlds._flows.world import FlowWorld
from worlds._lifecycle import translates_errors
from worlds._quiet import wait_idle
from worlds._urls import redact_url
from worlds.archive import DumpRow
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, Isolation, OpenTransaction
from worlds.query import CountField, RunCount, RunPage, RunQuery
from worlds.semantics import (
    check_history_span,
    check_window,
    decode_cursor,
    encode_cursor,
    index_terms,
    index_value,
    is_free,
    lease_deadline,
    most_selective_first,
)
from worlds.sqlite import codecs
from worlds.sqlite import schedules as schedule_ops
from worlds.sqlite import statements as sql
from worlds.sqlite.connection import Connection, parse_url
from worlds.sqlite.dump import SqliteLoad, SqliteSource
from worlds.sqlite.filters import count_runs_sql, list_runs_sql, match_counts_sql
from worlds.sqlite.idle import IdleLook
from worlds.sqlite.rows import Executes, SqliteRows
from worlds.sqlite.schema import SCHEMA_VERSION
from worlds.sqlite.steps import open_transaction
from worlds.sqlite.transactions import new_token, run_once

__all__ = ["SqliteWorld"]

T = TypeVar("T")


@translates_errors
class SqliteWorld(FlowWorld[SqliteRows]):
    """A world stored in an SQLite file, shareable by processes on one machine.

    Args:
        url: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``,
            optionally with the query parameters the module describes. A relative
            path is resolved against the working directory when the world is
            created. Nothing is opened until the first operation, which
            creates the file and its parent directories.
        create: ``False``: the file must exist; the first operation raises
            ``WorldMisconfiguredError`` naming the resolved path otherwise.
        shared: ``True``: refuse ``sqlite:///:memory:``, which dies with the process.
    """

    protocol_version = PROTOCOL_VERSION
    gathers_writes = True
    """The writes of one loop turn already share one transaction (``Connection.write``):
    a worker's group commit sends each commit at once instead of gathering them too."""

    def __init__(self, url: str, *, create: bool = True, shared: bool = False) -> None:
        self.url = url
        self.path, options = parse_url(url)
        if shared and self.path == ":memory:":
            raise WorldMisconfiguredError(
                f"{url} is held in this process's memory and thrown away when it exits, "
                "but a world that outlives this process is needed here: use a file path"
            )
        self.poll_interval = options["poll"]
        self._connection = Connection(self.path, options, create=create, describe=repr(self))
        self._idle = IdleLook(self.path, self._connection.hub)
        """Polls that found nothing, answered from memory while the file is unchanged."""

    def __repr__(self) -> str:
        return f"SqliteWorld({redact_url(self.url)!r})"

    async def _release(self) -> None:
        await self._connection.close()

    def _reopen(self) -> None:
        self._connection.reopen()

    async def _run_flow(self, flow: Callable[[SqliteRows], Coroutine[Any, Any, T]]) -> T:
        self._connection.check_open()
        return await self._connection.write(lambda tx: run_sync(flow(tx)))

    async def _read_flow(self, flow: Callable[[SqliteRows], Coroutine[Any, Any, T]]) -> T:
        self._connection.check_open()
        return await self._connection.read(lambda db: run_sync(flow(SqliteRows(db))))

    async def migrate(self) -> int:
        """Apply pending schema migrations (opening the file does it too)."""
        await self._connection.connect()
        return SCHEMA_VERSION

    async def info(self) -> dict[str, str | int]:
        """Path, schema version, ``synchronous`` (as the connection runs it: ``full``
        unless the URL traded durability away) and run counts per status."""

        def body(db: sqlite3.Connection) -> tuple[int, list[tuple[str, int]]]:
            level = int(db.execute("PRAGMA synchronous").fetchone()[0])
            counts = [(row["status"], row["runs"]) for row in db.execute(sql.COUNT_RUNS_BY_STATUS)]
            return level, counts

        level, counts = await self._connection.read(body)
        names = {0: "off", 1: "normal", 2: "full", 3: "extra"}
        facts: dict[str, str | int] = {
            "scheme": "sqlite",
            "path": self.path,
            "schema_version": SCHEMA_VERSION,
            "synchronous": names.get(level, str(level)),
        }
        for status, count in counts:
            facts[f"runs.{status}"] = count
        return facts

    async def setting(self, key: str, value: str | None = None) -> str | None:
        """See ``World.setting``."""
        self._connection.check_open()
        if value is None:

            def get(db: sqlite3.Connection) -> str | None:
                row = db.execute(sql.GET_SETTING, (key,)).fetchone()
                return None if row is None else str(row[0])

            return await self._connection.read(get)

        def put(rows: SqliteRows) -> str:
            rows.db.execute(sql.PUT_SETTING, (key, value))
            return str(rows.db.execute(sql.GET_SETTING, (key,)).fetchone()[0])

        return await self._connection.write(put)

    async def put_setting(self, key: str, value: str | None) -> None:
        """See ``World.put_setting``."""
        self._connection.check_open()

        def put(rows: SqliteRows) -> None:
            if value is None:
                rows.db.execute(sql.DROP_SETTING, (key,))
            else:
                rows.db.execute(sql.REPLACE_SETTING, (key, value))

        await self._connection.write(put)

    # ------------------------------------------------------------------ runs

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[types.WorkItem]:
        """See ``World.lease``.

        Items due at the same instant are leased in (run id, item id) order.
        """
        self._connection.check_open()
        wanted = sorted(set(names))
        if limit <= 0 or not wanted:
            return []
        free_sql, expired_sql = sql.due_work_sql(len(wanted))
        if self._idle.quiet_poll(WORK_TOPIC, tuple(wanted)):
            return []  # nothing was due, nothing written since, nothing due yet

        def builds(db: Executes) -> tuple[str | None, str | None] | None:
            # once a build registered, scans keep to the runs this worker's build
            # may lease (RFC 0025); before, no run recorded one: nothing to filter
            if not db.execute(sql.BUILDS_IN_USE).fetchone()[0]:
                return None
            everyone = [codecs.columns.worker(row) for row in db.execute(sql.WORKERS)]
            rights = deployments.rights_among(worker_id, everyone)
            return rights.build, rights.top

        def due(db: Executes, now_us: int) -> list[sqlite3.Row]:
            params: tuple[object, ...] = (now_us, *wanted, limit)
            scans = (free_sql, expired_sql)
            if (build := builds(db)) is not None:
                params, scans = (*params, *build), sql.due_work_sql(len(wanted), builds=True)
            rows = db.execute(scans[0], params).fetchall()
            rows += db.execute(scans[1], params).fetchall()
            rows.sort(key=lambda row: (row["available_at"], row["run_id"], row["id"]))
            return rows[:limit]

        def body(tx: SqliteRows) -> list[types.WorkItem]:
            rows = due(tx.db, tx.now_us)
            owners = {row["owner"] for row in rows if row["owner"] is not None}
            rights = run_sync(liveness.lease_rights(tx, worker_id, owners))
            if rights is None:  # fenced: declared dead, it leases nothing
                return []
            rows = [
                row
                for row in rows
                if row["owner"] is None
                or rights.may_take(row["owner"], codecs.from_micros(row["expires_at"]))
            ]
            expires = codecs.to_micros(lease_deadline(tx.now, lease_seconds))
            updates: list[tuple[object, ...]] = []
            items: list[types.WorkItem] = []
            started: dict[str, list[types.StepStarted]] = {}
            for row in rows:
                run_id, item_id, step = row["run_id"], row["id"], row["kind"] == "step"
                attempt = row["attempt"] + 1 if step and row["ever_leased"] else row["attempt"]
                token = new_token()
                lease = (row["available_at"], worker_id, token, expires, attempt, run_id, item_id)
                updates.append(lease)
                items.append(codecs.leased(row, attempt=attempt, token=token, expires=expires))
                if step:
                    begun = types.StepStarted(step=row["number"], attempt=attempt)
                    started.setdefault(run_id, []).append(begun)
            tx.db.executemany(sql.LEASE_WORK, updates)
            for run_id, events in started.items():
                bumped = tx.db.execute(sql.BUMP_LAST_SEQ, (len(events), run_id)).fetchone()
                last_seq = bumped["last_seq"]
                tx.queue_started(run_id, last_seq - len(events), events)
            tx.flush_events()
            taken = {item.run_id for item in items if item.kind == "workflow"}
            run_sync(deployments.record_builds(tx, rights.builds, taken))
            return items

        def look(db: sqlite3.Connection) -> bool:
            # one statement for both polls while idle; the scans only once an item
            # may be leasable (another build's runs or a live holder's may not be)
            if not self._idle.look(db, WORK_TOPIC).due:
                return False
            return bool(due(db, codecs.to_micros(types.utcnow())))

        def run(db: sqlite3.Connection, blocking: bool) -> bool:
            return run_once(lambda: look(db), blocking)

        # Look before taking the write lock: idle workers polling an empty queue
        # must not serialize every other process behind them.
        if not await self._connection.run(run):
            return []
        return await self._connection.write(body)

    async def renew_leases(
        self, worker_id: str, items: Sequence[types.WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        self._connection.check_open()
        if not items:
            return []

        def body(tx: SqliteRows) -> list[bool]:
            expires = codecs.to_micros(lease_deadline(tx.now, lease_seconds))
            return [
                tx.db.execute(
                    sql.RENEW_WORK, (expires, item.run_id, item.id, worker_id, item.token)
                ).rowcount
                == 1
                for item in items
            ]

        return await self._connection.write(body)

    async def release(self, worker_id: str, items: Sequence[types.WorkItem]) -> None:
        """See ``World.release``."""
        self._connection.check_open()
        rows = [(item.run_id, item.id, worker_id, item.token) for item in items]

        def body(tx: SqliteRows) -> None:
            if rows:
                tx.db.executemany(sql.RELEASE_WORK, rows)
            tx.signals.add(WORK_TOPIC)

        await self._connection.write(body)

    # ------------------------------------------------------------------ liveness

    async def list_workers(self) -> list[types.WorkerRecord]:
        """See ``World.list_workers``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.WorkerRecord]:
            workers = [codecs.columns.worker(row) for row in db.execute(sql.WORKERS)]
            return liveness.listing(workers, types.utcnow())

        return await self._connection.read(body)

    async def list_deployments(self) -> list[types.DeploymentRecord]:
        """See ``World.list_deployments``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.DeploymentRecord]:
            builds: dict[str, deployments.Deployed] = {}
            for row in db.execute(sql.DEPLOYMENTS):
                since = codecs.from_micros(row["registered_at"])
                build = builds.setdefault(
                    row["build_id"], deployments.Deployed(row["build_id"], {}, since)
                )
                build.workflows[row["workflow"]] = row["pin"]
            workers = [codecs.columns.worker(row) for row in db.execute(sql.WORKERS)]
            counts = [
                deployments.OpenRuns(row["build_id"], row["pin"], row["runs"])
                for row in db.execute(sql.OPEN_RUNS_BY_BUILD)
            ]
            return deployments.listing(list(builds.values()), workers, counts)

        return await self._connection.read(body)

    def now(self) -> datetime:
        """See ``World.now``: the host's clock."""
        return types.utcnow()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``.

        Signals from any world object on the same file in this process wake
        the caller at once (or make the next ``wait`` return at once when
        nobody was waiting); changes made by other processes are noticed by
        returning after at most the ``poll`` interval, so callers re-check.
        """
        self._connection.check_open()
        await self._connection.hub.wait(topic, min(timeout, self.poll_interval))

    async def wait_idle(self, topic: str, names: Collection[str], timeout: float) -> None:
        """See ``World.wait_idle``: the files are looked at every ``poll`` interval, so
        another process's write ends the wait within one."""
        await wait_idle(
            self._idle.quiet,
            topic,
            names,
            lambda: self._idle.token(topic, names),
            lambda seconds: self.wait(topic, seconds),
            timeout,
        )

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> types.RunRecord | None:
        """See ``World.get_run``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> types.RunRecord | None:
            row = db.execute(sql.GET_RUN, (run_id,)).fetchone()
            return None if row is None else codecs.columns.run(row)

        return await self._connection.read(body)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        """See ``World.read_events``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.EventKind]:
            rows = db.execute(sql.READ_EVENTS, (run_id, after_seq)).fetchall()
            return [codecs.decode_event(row["data"]) for row in rows]

        return await self._connection.read(body)

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``.

        With several attribute filters (``query.attributes`` and the top-level
        ``attribute = value`` terms of ``query.where``), the one with the
        fewest matches drives the scan (``terms.most_selective_first``), the
        matches counted in the same read.
        """
        self._connection.check_open()
        if query.limit < 1:
            raise ValueError(f"limit must be at least 1, not {query.limit}")
        before = decode_cursor(query.cursor) if query.cursor else None
        if query.where is not None:
            attributes, rest = index_terms(query.attributes, query.where)
            query = msgspec.structs.replace(query, attributes=attributes, where=rest)
        list_runs_sql(query, before)  # a malformed filter raises here, not in the reader

        def body(db: sqlite3.Connection) -> list[types.RunRecord]:
            ordered = query
            if len(query.attributes) > 1:
                counts = db.execute(*match_counts_sql(query.attributes)).fetchone()
                attributes = most_selective_first(query.attributes, tuple(counts))
                ordered = msgspec.structs.replace(query, attributes=attributes)
            statement, params = list_runs_sql(ordered, before)
            return [codecs.columns.run(row) for row in db.execute(statement, params)]

        found = await self._connection.read(body)
        page = tuple(found[: query.limit])
        more = len(found) > query.limit
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: types.AttributeValue) -> types.Claim | None:
        """See ``World.find_claim``."""
        self._connection.check_open()
        params = (key, index_value(value))

        def body(db: sqlite3.Connection) -> types.Claim | None:
            row = db.execute(sql.GET_CLAIM, params).fetchone()
            if row is None or is_free(codecs.columns.held(row), types.utcnow()):
                return None  # never claimed, released or lapsed
            return codecs.columns.claim(row)

        return await self._connection.read(body)

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[types.StreamChunk]:
        """See ``World.read_stream``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.StreamChunk]:
            rows = db.execute(sql.READ_STREAM, (run_id, name, max(start, 0), max(limit, 0)))
            return [
                types.StreamChunk(
                    offset=row["seq"], data=row["data"], at=codecs.from_micros(row["at"])
                )
                for row in rows
            ]

        return await self._connection.read(body)

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """See ``World.stream_closed``."""
        self._connection.check_open()
        return await self._connection.read(
            lambda db: db.execute(sql.STREAM_CLOSED, (run_id, name)).fetchone() is not None
        )

    async def list_hooks(self, run_id: str | None = None) -> list[types.HookRecord]:
        """See ``World.list_hooks``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.HookRecord]:
            if run_id is None:
                rows = db.execute(sql.LIST_HOOKS).fetchall()
            else:
                rows = db.execute(sql.LIST_RUN_HOOKS, (run_id,)).fetchall()
            return [codecs.columns.hook(row) for row in rows]

        return await self._connection.read(body)

    async def run_claims(self, run_id: str) -> list[types.Claim]:
        """See ``World.run_claims``; pairs with the same key come in value order."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.Claim]:
            now = codecs.to_micros(types.utcnow())
            rows = db.execute(sql.RUN_CLAIMS, (run_id, now))
            return [codecs.columns.claim(row) for row in rows]

        return await self._connection.read(body)

    async def get_key_limit(self, key: str) -> types.KeyLimit | None:
        """See ``World.get_key_limit``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> types.KeyLimit | None:
            row = db.execute(sql.KEY_ROW, (key,)).fetchone()
            return None if row is None else key_limit(row)

        return await self._connection.read(body)

    async def list_slots(self, key: str, value: types.AttributeValue) -> list[types.Slot]:
        """See ``World.list_slots``."""
        self._connection.check_open()
        pair = (key, index_value(value))

        def body(db: sqlite3.Connection) -> list[types.Slot]:
            return [codecs.columns.slot(row) for row in db.execute(sql.LIST_SLOTS, pair)]

        return await self._connection.read(body)

    async def list_key_slots(self, key: str, limit: int = 1000) -> list[types.Slot]:
        """See ``World.list_key_slots``: the ``slots_holding`` and ``slots_waiting``
        indexes lead with the key."""
        self._connection.check_open()
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")

        def body(db: sqlite3.Connection) -> list[types.Slot]:
            rows = db.execute(sql.KEY_SLOTS, (key, limit))
            return [codecs.columns.slot(row) for row in rows]

        return await self._connection.read(body)

    async def slot_history(
        self, key: str, since: datetime, until: datetime, width: int = 60
    ) -> list[types.SlotSample]:
        """See ``World.slot_history``: a range of ``slot_samples_key`` grouped per
        bucket and, per pair, a seek for its newest sample before the window."""
        self._connection.check_open()
        check_history_span(since, until, width)
        params = (key, codecs.to_micros(since), codecs.to_micros(until), width * 1_000_000)

        def body(db: sqlite3.Connection) -> list[types.SlotSample]:
            rows = db.execute(sql.SLOT_HISTORY, params)
            return [codecs.columns.slot_sample(key, row) for row in rows]

        return await self._connection.read(body)

    async def count_runs(
        self, query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
    ) -> list[RunCount]:
        """See ``World.count_runs``: one grouped read (``filters.count_runs_sql``)."""
        self._connection.check_open()
        check_window(since, until, width)
        statement, params = count_runs_sql(query, field, since, until, width)

        def body(db: sqlite3.Connection) -> list[RunCount]:
            return [
                RunCount(bucket=int(bucket), status=types.RunStatus(status), count=int(n))
                for bucket, status, n in db.execute(statement, params)
            ]

        return await self._connection.read(body)

    async def run_slots(self, run_id: str) -> list[types.Slot]:
        """See ``World.run_slots``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[types.Slot]:
            return [codecs.columns.slot(row) for row in db.execute(sql.RUN_SLOTS, (run_id,))]

        return await self._connection.read(body)

    # ------------------------------------------------------------------ retention

    # ------------------------------------------------------------------ archive

    def export_rows(self, run_ids: Sequence[str] | None = None) -> AsyncIterator[DumpRow]:
        """See ``World.export_rows``: one read per page of runs."""
        self._connection.check_open()
        return archive.export_rows(SqliteSource(self._connection), run_ids)

    async def import_rows(self, rows: Sequence[DumpRow]) -> None:
        """See ``World.import_rows``: one write transaction."""
        self._connection.check_open()
        await self._connection.write(
            lambda tx: run_sync(archive.import_rows(tx, SqliteLoad(tx), rows))
        )

    # ------------------------------------------------------------------ schedules

    async def create_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord:
        """See ``World.create_schedule``."""
        self._connection.check_open()
        return await schedule_ops.create_schedule(self._connection, record)

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        """See ``World.get_schedule``."""
        self._connection.check_open()
        return await schedule_ops.get_schedule(self._connection, schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[types.ScheduleRecord]:
        """See ``World.list_schedules``."""
        self._connection.check_open()
        return await schedule_ops.list_schedules(self._connection, after, limit)

    async def update_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord | None:
        """See ``World.update_schedule``."""
        self._connection.check_open()
        return await schedule_ops.update_schedule(self._connection, record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._connection.check_open()
        return await schedule_ops.delete_schedule(self._connection, schedule_id)

    async def fire_schedules(
        self, fires: Sequence[types.ScheduleFire]
    ) -> list[types.ScheduleRecord | Exception | None]:
        """See ``World.fire_schedules``: one transaction (one fsync) for the batch."""
        self._connection.check_open()
        return await schedule_ops.fire_schedules(self._connection, fires)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> types.ScheduleLease:
        """See ``World.lease_schedules``."""
        self._connection.check_open()
        return await schedule_ops.lease_schedules(
            self._connection, worker_id, names, limit, lease_seconds, self._idle
        )

    # ------------------------------------------------------------------ transactions

    def transaction(
        self, lease: types.WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AbstractAsyncContextManager[OpenTransaction]:
        """See ``World.transaction``: the file's write lock (``BEGIN IMMEDIATE``) on a
        second connection for the block; every other writer of the file waits."""
        self._connection.check_open()
        return open_transaction(self._connection, lease, worker_id, isolation)
