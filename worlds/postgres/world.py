"""``PostgresWorld``: the protocol operations of the PostgreSQL world.

A write runs its flow (``worlds._flows``) over one transaction's rows
(``rows.PostgresRows``), awaiting asyncpg, retried when it lost a deadlock, a
serialization race or a race the flow itself saw (``Retry``). The commonest
commits and starts take the one-round-trip PL/pgSQL functions instead
(``fast.py``, ``committing.py``): the one place the flows' algorithm is
written a second time. Reads are queries. What the world promises and its URL
options: the package docstring (``worlds.postgres``).
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Sequence,
)
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import asyncpg
import msgspec

from worlds._columns import key_limit
from worlds._flows import (
    archive,
    create,
    deployments,
    liveness,
)
from worlds._flows.rows import Retry, Rollback, Rows
from worlds._flows.world import FlowWorld
from worlds._lifecycle import WorldClosedError, translates_errors
from worlds._quiet import Quiet, poll_key, wait_idle
from worlds._urls import redact_url
from worlds.archive import DumpRow
from worlds.errors import is_read_only_server
from worlds.postgres import codecs, filters, schema
from worlds.postgres import statements as sql
from worlds.postgres.committing import CommitPaths
from worlds.postgres.connection import (
    KEEPALIVE_SETTINGS,
    RETRIES,
    RETRYABLE,
    ServerClock,
    backoff,
    keep_session,
    parse_url,
    retry,
    set_keepalive,
)
from worlds.postgres.dump import PostgresLoad, PostgresSource
from worlds.postgres.fast import claiming_params, claiming_result, start_params, start_result
from worlds.postgres.listening import Listener
from worlds.postgres.notices import Notices
from worlds.postgres.rows import PostgresRows, is_run_id_taken
from worlds.postgres.schedules import ScheduleStore
from worlds.postgres.steps import open_transaction
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC, Isolation, OpenTransaction
from worlds.semantics import (
    check_history_span,
    check_window,
    decode_cursor,
    encode_cursor,
    index_value,
    is_free,
    lease_deadline,
    runs_ahead,
)

if TYPE_CHECKING:
    from worlds.postgres.connection import Connection, Pool
from worlds import types
from worlds.query import CountField, RunCount, RunPage, RunQuery

__all__ = ["PostgresWorld", "WorldClosedError"]

T = TypeVar("T")


@translates_errors
class PostgresWorld(FlowWorld[PostgresRows]):
    """A world stored in PostgreSQL, shareable by any number of processes and hosts.

    Args:
        url: ``postgresql://...`` (or ``postgres://...``) with the query
            parameters the module describes. Nothing connects until the first
            operation, which creates the connection pool, applies pending
            schema migrations and starts listening for notifications.
        clock: This process's clock (aware UTC). The world corrects it by its
            measured offset to the server's clock; tests pass a skewed one to
            check that a worker's clock decides nothing.
        create: ``False``: the schema must exist; the first operation raises
            ``WorldMisconfiguredError`` naming it otherwise, and creates nothing.
        shared: accepted for ``worlds.open``; a PostgreSQL world always is.
        fast_commits: ``False`` sends every commit through the general path,
            never the one-round-trip ``commit_run`` function (the parity test
            and the benchmark compare the two).
    """

    protocol_version = PROTOCOL_VERSION
    gathers_writes = False

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], datetime] = types.utcnow,
        create: bool = True,
        shared: bool = False,
        fast_commits: bool = True,
    ) -> None:
        self.url = url
        self._clock = ServerClock(clock)
        self.dsn, self.schema, options = parse_url(url)
        self._create = create
        self._fast_commits = fast_commits
        self.poll_interval = options["poll"]
        self._pool_size = max(1, int(options["pool_size"]))
        self.command_timeout = options["command_timeout"]
        self._channel = schema.channel(self.schema)
        self._run_channel = schema.channel(self.schema, "runs")
        self._settings = {
            "search_path": schema.quote(self.schema),
            "application_name": "workflow",
            **KEEPALIVE_SETTINGS,
        }
        self._pool: Pool | None = None
        self._connecting: anyio.Lock | None = None
        # the 10 s safety poll, as on SQLite, although every write that makes work
        # due notifies: a lease that runs out is no write, and an item leased after
        # an idle poll saw nothing (a run started by a worker in its own process)
        # comes due at its lease's end with no notification if that worker died
        self._quiet = Quiet()
        """Polls that found nothing, answered from memory until a notification (``_quiet``)."""
        self._listening = Listener(
            self.dsn,
            self._settings,
            command_timeout=self.command_timeout,
            poll_interval=self.poll_interval,
            channels=(self._channel, self._run_channel),
        )
        self._notices = Notices()
        self._commits = CommitPaths(
            connect=self._connect,
            write=self._write,
            notices=self._notices,
            post=self._post,
            closed_here=self._listening.closed_here,
            runs_here=self._listening.runs_here,
            now=self._clock.now,
            channels=(self._channel, self._run_channel),
            fast_commits=fast_commits,
        )
        self._closed = False

    def __repr__(self) -> str:
        return f"PostgresWorld({redact_url(self.url)!r})"

    def _reopen(self) -> None:
        self._closed = False

    async def _release(self) -> None:
        """Close the pool and the listener."""
        self._closed = True
        self._listening.hub.wake_all()
        listener = self._listening.detach()
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.command_timeout):
            await self._notices.drain()
        pool, self._pool = self._pool, None
        with anyio.CancelScope(shield=True):
            if listener is not None and not listener.is_closed():
                await listener.close()
            if pool is not None:
                await pool.close()

    async def migrate(self) -> int:
        """Apply pending schema migrations (the first operation does it too)."""
        pool = await self._connect()
        async with pool.acquire() as conn:
            return await self._migrate(conn)

    async def info(self) -> dict[str, str | int]:
        """Scheme, schema, schema version, the server's ``fsync`` and
        ``synchronous_commit`` as this world's sessions see them (the world
        never changes them), and run counts per status."""
        pool = await self._connect()
        async with pool.acquire() as conn:
            version = await conn.fetchval(schema.APPLIED_VERSION)
            counts = await conn.fetch(sql.COUNT_RUNS_BY_STATUS)
            fsync = await conn.fetchval("SHOW fsync")
            synchronous_commit = await conn.fetchval("SHOW synchronous_commit")
        facts: dict[str, str | int] = {
            "scheme": "postgresql",
            "schema": self.schema,
            "schema_version": int(version),
            "fsync": str(fsync),
            "synchronous_commit": str(synchronous_commit),
        }
        facts.update({f"runs.{row['status']}": int(row["count"]) for row in counts})
        return facts

    async def setting(self, key: str, value: str | None = None) -> str | None:
        """See ``World.setting``."""
        pool = await self._connect()
        if value is not None:
            await pool.execute(sql.PUT_SETTING, key, value)
        recorded = await pool.fetchval(sql.GET_SETTING, key)
        return None if recorded is None else str(recorded)

    async def put_setting(self, key: str, value: str | None) -> None:
        """See ``World.put_setting``."""
        pool = await self._connect()
        if value is None:
            await pool.execute(sql.DROP_SETTING, key)
        else:
            await pool.execute(sql.REPLACE_SETTING, key, value)

    # ------------------------------------------------------------------ plumbing

    def _check_open(self) -> None:
        if self._closed:
            raise WorldClosedError(f"{self!r} is closed")

    async def _migrate(self, conn: Connection) -> int:
        return await schema.migrate(conn, self.schema, create=self._create, url=self.url)

    async def _connect(self) -> Pool:
        """The pool, created (with migrations and the listener) on first use."""
        self._check_open()
        if self._pool is not None:
            return self._pool
        if self._connecting is None:
            self._connecting = anyio.Lock()
        async with self._connecting:
            self._check_open()
            if self._pool is None:
                # No floor of idle connections: asyncpg restores a floor in the
                # background and logs a traceback for each failed attempt while
                # the server is down; connections open when operations need them.
                pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=0,
                    max_size=self._pool_size,
                    server_settings=self._settings,
                    reset=keep_session,
                    init=self._init_connection,
                    command_timeout=self.command_timeout,
                    timeout=self.command_timeout,
                )
                try:
                    async with pool.acquire() as conn:
                        await self._migrate(conn)
                        await self._clock.measure(conn)
                    await self._listening.listen()
                except BaseException:
                    with anyio.CancelScope(shield=True):
                        await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _on_world_error(self, cause: BaseException) -> None:
        """After a read-only server's answer, replace every connection on next use.

        A failover manager may fence the old primary read-only, or a DNS name
        may still lead to a node that is now a standby: connections that stay
        would keep meeting it. New ones go through host selection again
        (``target_session_attrs``, ``worlds.postgres.connection.parse_url``)
        and find the primary once there is one.
        """
        if not is_read_only_server(cause):
            return
        if self._pool is not None:
            await self._pool.expire_connections()
        listener = self._listening.detach()
        if listener is not None:
            listener.terminate()

    async def _init_connection(self, conn: Connection) -> None:
        set_keepalive(conn, self.command_timeout)

    def _post(self, topics: Collection[str]) -> None:
        """Notify ``topics`` right after this commit, in the background (``notices``)."""
        if topics and self._pool is not None:
            self._notices.post(self._notify, topics)

    async def _notify(self, topics: list[str]) -> None:
        pool = self._pool
        if pool is not None:
            await pool.execute(sql.NOTIFY, self._channel, self._run_channel, topics)

    async def _run_flow(self, flow: Callable[[PostgresRows], Coroutine[Any, Any, T]]) -> T:
        self._check_open()
        return await self._write(flow)

    async def _write(self, body: Callable[[PostgresRows], Awaitable[T]]) -> T:
        """Run ``body`` as one transaction; again if it lost a deadlock or serialization
        race, or a race its flow saw (``Retry``); a flow's ``Rollback`` answers its result.

        Its notifications go in the transaction when it is this world object's
        only write in flight, else right after it commits (``notices``).
        """
        pool = await self._connect()
        with self._notices.writing() as inline:
            races = 0
            for attempt in range(RETRIES):
                try:
                    async with pool.acquire() as conn:
                        try:
                            async with conn.transaction():
                                rows = PostgresRows(
                                    conn, self._channel if inline else None, self._clock.now
                                )
                                result = await body(rows)
                                if rows.signals and inline:
                                    await conn.execute(
                                        sql.NOTIFY,
                                        self._channel,
                                        self._run_channel,
                                        sorted(rows.signals),
                                    )
                        except Rollback as rollback:
                            return cast(T, rollback.result)
                    self._listening.closed_here(rows.signals)
                    if not inline:
                        self._post(rows.signals)
                    return result
                except Retry:
                    races += 1  # a concurrent transaction won: now there is something to see
                    if races == RETRIES * 4:
                        raise RuntimeError(f"{self!r} kept losing races; try again") from None
                except RETRYABLE:
                    if attempt == RETRIES - 1:
                        raise
                    await anyio.sleep(backoff(attempt))
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ runs

    async def create_run(self, request: types.CreateRunRequest) -> types.CreateRunResult:
        """See ``World.create_run`` and ``StartPolicy`` (a takeover of the policy's key).

        A plain start (no flow control: slots, reuse windows, a start time,
        debounce) takes one round trip: ``start_run`` when it runs ahead,
        ``create_run`` (the function) when it claims pairs or has a deadline and
        every pair is free, else the create flow's one statement. Every other
        start runs the create flow in a transaction, without a first task run
        ahead: it takes locks as it goes, and the task's time may pass meanwhile.
        """
        self._check_open()
        create.check(request)
        general = msgspec.structs.replace(request, lease_to=None, first=None)
        flow_control = request.limits or request.rates or request.priority
        if not (flow_control or request.windows or request.debounce or request.start_at):
            pool = await self._connect()
            if self._fast_commits and runs_ahead(request):
                started = await self._start_run(pool, request)
                if started is not None:
                    return started
            if not request.unique and request.timeout_at is None:
                return await self._single(lambda rows: create.create_run(rows, general))
            claimed = await self._create_claiming(pool, request)
            if claimed is not None:
                return claimed
        return await self._write(lambda rows: create.create_run(rows, general))

    async def _single(self, flow: Callable[[Rows], Awaitable[T]]) -> T:
        """Run ``flow``, which writes in one statement, on a connection outside any
        transaction (the statement is one by itself)."""
        pool = await self._connect()
        with self._notices.writing() as inline:
            async with pool.acquire() as conn:
                channel = self._channel if inline else None
                rows = PostgresRows(conn, channel, self._clock.now, single_statement=True)
                result = await flow(rows)
        self._listening.closed_here(rows.signals)
        if not inline:
            self._post(rows.signals)
        return result

    async def _create_claiming(
        self, pool: Pool, request: types.CreateRunRequest
    ) -> types.CreateRunResult | None:
        """``request`` in one ``create_run`` call, its pairs claimed and its deadline
        queued; ``None`` (nothing written) when a pair is held: the flow decides then."""
        with self._notices.writing() as inline:
            now = self._clock.now()
            params = claiming_params(request, now, self._channel if inline else None)
            try:
                await retry(pool.execute, sql.CREATE_RUN_CLAIMING, *params)
            except asyncpg.exceptions.UniqueViolationError as exc:
                if is_run_id_taken(exc):
                    create.run_exists(request.run_id)
                raise
            except asyncpg.exceptions.PostgresError as exc:
                if exc.sqlstate == sql.PAIR_HELD:
                    return None
                raise
        if not inline:
            self._post([WORK_TOPIC])
        return claiming_result(request, now)

    async def _start_run(
        self, pool: Pool, request: types.CreateRunRequest
    ) -> types.CreateRunResult | None:
        """``request`` (with ``lease_to``) in one ``start_run`` call: the run with its
        workflow item leased, or with its first task; ``None`` if it needs the
        other paths (pairs to claim, a deadline)."""
        with self._notices.writing() as inline:
            channels = (self._channel, self._run_channel) if inline else (None, None)
            start = start_params(request, self._clock.now(), *channels)
            if start is None:
                return None
            try:
                rows = await retry(pool.fetch, sql.START_RUN, *start.params)
            except asyncpg.exceptions.UniqueViolationError as exc:
                if is_run_id_taken(exc):
                    create.run_exists(request.run_id)
                raise
        if not inline and rows[-1]["notify"]:
            self._post([WORK_TOPIC])
        self._listening.running_here(request.run_id)
        return start_result(request, start, rows)

    async def commit(self, request: types.CommitRequest) -> types.CommitResult:
        """See ``World.commit``."""
        self._check_open()
        return await self._commits.commit(request)

    def transaction(
        self, lease: types.WorkItem, worker_id: str, isolation: Isolation = "repeatable_read"
    ) -> AbstractAsyncContextManager[OpenTransaction]:
        """See ``World.transaction``: a pooled connection's transaction at ``isolation``."""
        self._check_open()
        return open_transaction(
            self._connect, self._clock.now, self._step_committed, lease, worker_id, isolation
        )

    def _step_committed(self, signals: set[str]) -> None:
        self._listening.closed_here(signals)
        self._post(signals)

    async def commit_many(
        self, requests: Sequence[types.CommitRequest]
    ) -> list[types.CommitResult | Exception]:
        """See ``World.commit_many``: the requests ``commit_run`` can apply go to
        ``commit_runs`` in one call (one round trip, one transaction); the others,
        and those it leaves to the general path (a lost lease, a late result,
        a recheck), follow in one transaction, each in a savepoint of its own.
        A failing ``commit_runs`` call sends the whole batch that second way."""
        self._check_open()
        return await self._commits.commit_many(requests)

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[types.StreamChunk]:
        """See ``World.read_stream``."""
        self._check_open()
        pool = await self._connect()
        rows = await retry(pool.fetch, sql.READ_STREAM, run_id, name, max(start, 0), max(limit, 0))
        return [
            types.StreamChunk(offset=row["seq"], data=row["data"], at=row["at"]) for row in rows
        ]

    async def stream_closed(self, run_id: str, name: str) -> bool:
        """See ``World.stream_closed``."""
        self._check_open()
        pool = await self._connect()
        closed: bool = await retry(pool.fetchval, sql.STREAM_CLOSED, run_id, name)
        return closed

    async def list_hooks(self, run_id: str | None = None) -> list[types.HookRecord]:
        """See ``World.list_hooks``."""
        self._check_open()
        pool = await self._connect()
        if run_id is None:
            rows = await pool.fetch(sql.LIST_HOOKS)
        else:
            rows = await pool.fetch(sql.LIST_RUN_HOOKS, run_id)
        return [codecs.columns.hook(row) for row in rows]

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[types.WorkItem]:
        """See ``World.lease``.

        Items due at the same instant are leased in (run id, item id) order.
        Items whose row or run row another transaction holds are skipped for now.
        """
        self._check_open()
        wanted = sorted(set(names))
        if limit <= 0 or not wanted:
            return []
        pool = await self._connect()
        poll, token = poll_key(WORK_TOPIC, wanted), self._listening.heard(WORK_TOPIC, wanted)
        if self._quiet.quiet(poll, token):
            return []  # nothing was due, no work notified since, nothing due yet
        await self._clock.refresh(pool)
        now = self._clock.now()
        expires = lease_deadline(now, lease_seconds)
        head, middle = codecs.STEP_STARTED_PARTS
        rows = await retry(
            pool.fetch, sql.LEASE, wanted, now, limit, worker_id, expires, head, middle
        )
        if not rows:
            later = await pool.fetchval(sql.NEXT_WORK, wanted)
            self._quiet.found(poll, token, None if later is None else (later - now).total_seconds())
            return []
        self._quiet.forget(poll)
        return [codecs.work_item_from_row(row, expires) for row in rows]

    async def renew_leases(
        self, worker_id: str, items: Sequence[types.WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        self._check_open()
        if not items:
            return []
        pool = await self._connect()
        expires = lease_deadline(self._clock.now(), lease_seconds)
        rows = await pool.fetch(
            sql.RENEW, expires, [i.id for i in items], [i.token for i in items], worker_id
        )
        alive = {(row["id"], row["token"]) for row in rows}
        return [(item.id, item.token) in alive for item in items]

    async def release(self, worker_id: str, items: Sequence[types.WorkItem]) -> None:
        """See ``World.release``."""
        self._check_open()
        pool = await self._connect()
        await pool.execute(
            sql.RELEASE,
            [i.id for i in items],
            [i.token for i in items],
            worker_id,
            self._channel,
            WORK_TOPIC,
        )

    # ------------------------------------------------------------------ liveness

    async def heartbeat(self, worker_id: str, in_flight: int) -> bool:
        """See ``World.heartbeat``: one statement (``HEARTBEAT``)."""
        self._check_open()
        pool = await self._connect()
        row = await retry(
            pool.fetchrow, sql.HEARTBEAT, worker_id, in_flight, self._channel, WORK_TOPIC
        )
        return row is not None and bool(row["alive"])

    async def list_workers(self) -> list[types.WorkerRecord]:
        """See ``World.list_workers``."""
        self._check_open()
        pool = await self._connect()
        rows = await pool.fetch(sql.WORKERS)
        workers = [codecs.columns.worker(row) for row in rows]
        return liveness.listing(workers, self._clock.now())

    async def list_deployments(self) -> list[types.DeploymentRecord]:
        """See ``World.list_deployments``."""
        self._check_open()
        pool = await self._connect()
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            builds: dict[str, deployments.Deployed] = {}
            for row in await conn.fetch(sql.DEPLOYMENTS):
                build = builds.setdefault(
                    row["build_id"],
                    deployments.Deployed(row["build_id"], {}, row["registered_at"]),
                )
                build.workflows[row["workflow"]] = row["pin"]
            workers = [codecs.columns.worker(row) for row in await conn.fetch(sql.WORKERS)]
            counts = [
                deployments.OpenRuns(row["build_id"], row["pin"], row["runs"])
                for row in await conn.fetch(sql.OPEN_RUNS_BY_BUILD)
            ]
        return deployments.listing(list(builds.values()), workers, counts)

    def now(self) -> datetime:
        """See ``World.now``: this process's clock corrected to the server's."""
        return self._clock.now()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``.

        Notifications from every process sharing the schema wake the caller
        at once (or make the next ``wait`` return at once when nobody was
        waiting). Without one, ``wait`` returns after at most the ``poll``
        interval; while the listener connection is down it is reopened, and
        callers are woken to poll.
        """
        await self._connect()
        await self._listening.wait(topic, timeout)

    async def wait_idle(self, topic: str, names: Collection[str], timeout: float) -> None:
        """See ``World.wait_idle``: until a notification of ``topic``, a due time the
        last poll saw, or the safety interval (at once while the listener is down)."""
        await wait_idle(
            self._quiet,
            topic,
            names,
            lambda: self._listening.heard(topic, names),
            lambda seconds: self.wait(topic, seconds),
            timeout,
        )

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> types.RunRecord | None:
        """See ``World.get_run``."""
        self._check_open()
        row = await (await self._connect()).fetchrow(sql.GET_RUN, run_id)
        return None if row is None else codecs.columns.run(row)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[types.EventKind]:
        """See ``World.read_events``."""
        self._check_open()
        rows = await (await self._connect()).fetch(sql.READ_EVENTS, run_id, after_seq)
        return [codecs.decode_event(row["data"], row["seq"], row["at"]) for row in rows]

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``.

        ``query.where`` compiles to one parameterised statement with the other
        filters (``filters.list_runs_sql``); its top-level ``attribute = value``
        terms drive the scan through the attribute index.
        """
        self._check_open()
        if query.limit < 1:
            raise ValueError(f"limit must be at least 1, not {query.limit}")
        before = decode_cursor(query.cursor) if query.cursor else None
        statement, params = filters.list_runs_sql(query, before)
        rows = await (await self._connect()).fetch(statement, *params)
        page = tuple(codecs.columns.run(row) for row in rows[: query.limit])
        more = len(rows) > query.limit
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: types.AttributeValue) -> types.Claim | None:
        """See ``World.find_claim``."""
        self._check_open()
        pool = await self._connect()
        row = await pool.fetchrow(sql.GET_CLAIM, key, index_value(value))
        if row is None or is_free(codecs.columns.held(row), self._clock.now()):
            return None  # never claimed, released or lapsed
        return codecs.columns.claim(row)

    async def run_claims(self, run_id: str) -> list[types.Claim]:
        """See ``World.run_claims``; pairs with the same key come in value order."""
        self._check_open()
        rows = await (await self._connect()).fetch(sql.RUN_CLAIMS, run_id, self._clock.now())
        return [codecs.columns.claim(row) for row in rows]

    async def get_key_limit(self, key: str) -> types.KeyLimit | None:
        """See ``World.get_key_limit``."""
        self._check_open()
        row = await (await self._connect()).fetchrow(sql.KEY_ROW, key)
        return None if row is None else key_limit(row)

    async def list_slots(self, key: str, value: types.AttributeValue) -> list[types.Slot]:
        """See ``World.list_slots``."""
        self._check_open()
        rows = await (await self._connect()).fetch(sql.LIST_SLOTS, key, index_value(value))
        return [codecs.columns.slot(row) for row in rows]

    async def slot_history(
        self, key: str, since: datetime, until: datetime, width: int = 60
    ) -> list[types.SlotSample]:
        """See ``World.slot_history``: a range of ``slot_samples_key`` grouped per
        bucket and, per pair, a seek for its newest sample before the window."""
        self._check_open()
        check_history_span(since, until, width)
        if "\0" in key:
            return []  # PostgreSQL text holds no NUL, so no pair has this key
        rows = await (await self._connect()).fetch(sql.SLOT_HISTORY, key, since, until, width)
        return [codecs.columns.slot_sample(key, row) for row in rows]

    async def list_key_slots(self, key: str, limit: int = 1000) -> list[types.Slot]:
        """See ``World.list_key_slots``: the slot indexes lead with the key."""
        self._check_open()
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if "\0" in key:
            return []  # PostgreSQL text holds no NUL, so no pair has this key
        rows = await (await self._connect()).fetch(sql.KEY_SLOTS, key, limit)
        return [codecs.columns.slot(row) for row in rows]

    async def count_runs(
        self, query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
    ) -> list[RunCount]:
        """See ``World.count_runs``: one grouped read (``filters.count_runs_sql``)."""
        self._check_open()
        check_window(since, until, width)
        statement, params = filters.count_runs_sql(query, field, since, until, width)
        rows = await (await self._connect()).fetch(statement, *params)
        return [
            RunCount(
                bucket=int(row["bucket"]), status=types.RunStatus(row["status"]), count=row["n"]
            )
            for row in rows
        ]

    async def run_slots(self, run_id: str) -> list[types.Slot]:
        """See ``World.run_slots``."""
        self._check_open()
        rows = await (await self._connect()).fetch(sql.RUN_SLOTS, run_id)
        return [codecs.columns.slot(row) for row in rows]

    # ------------------------------------------------------------------ retention

    # ------------------------------------------------------------------ archive

    def export_rows(self, run_ids: Sequence[str] | None = None) -> AsyncIterator[DumpRow]:
        """See ``World.export_rows``: each page of runs read in one snapshot."""
        self._check_open()
        return archive.export_rows(PostgresSource(self._connect), run_ids)

    async def import_rows(self, rows: Sequence[DumpRow]) -> None:
        """See ``World.import_rows``: one transaction, each kind one pipelined batch."""
        self._check_open()
        await self._write(lambda tx: archive.import_rows(tx, PostgresLoad(tx), rows))

    # ------------------------------------------------------------------ schedules

    @property
    def _schedules(self) -> ScheduleStore:
        return ScheduleStore(
            self._connect,
            self._write,
            self._clock.now,
            self._clock.refresh,
            self._quiet,
            self._listening.heard,
        )

    async def create_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord:
        """See ``World.create_schedule``."""
        self._check_open()
        return await self._schedules.create(record)

    async def get_schedule(self, schedule_id: str) -> types.ScheduleRecord | None:
        """See ``World.get_schedule``."""
        self._check_open()
        return await self._schedules.get(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[types.ScheduleRecord]:
        """See ``World.list_schedules``."""
        self._check_open()
        return await self._schedules.list(after, limit)

    async def update_schedule(self, record: types.ScheduleRecord) -> types.ScheduleRecord | None:
        """See ``World.update_schedule``."""
        self._check_open()
        return await self._schedules.update(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._check_open()
        return await self._schedules.delete(schedule_id)

    async def fire_schedules(
        self, fires: Sequence[types.ScheduleFire]
    ) -> list[types.ScheduleRecord | Exception | None]:
        """See ``World.fire_schedules``: one transaction (one WAL flush) for the batch."""
        self._check_open()
        return await self._schedules.fire(fires)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> types.ScheduleLease:
        """See ``World.lease_schedules``."""
        self._check_open()
        return await self._schedules.lease(names, limit, lease_seconds)
