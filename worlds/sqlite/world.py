"""The protocol operations of the SQLite world: read rows, apply the rule, write.

Each operation is one function over the connection (``worlds.sqlite.connection``);
a write is one ``Writer`` transaction (``worlds.sqlite.transactions``) that asks
``worlds._rules`` what to do and stores the outcome.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from datetime import datetime

import msgspec

from worlds._lifecycle import ClosesOnExit, translates_errors
from worlds._rules import batches, claims, commits, reopen, requests, resume, runs, streams, terms
from worlds._urls import redact_url
from worlds.errors import WorldMisconfiguredError
from worlds.protocol import PROTOCOL_VERSION, WORK_TOPIC
from worlds.semantics import (
    decode_cursor,
    encode_cursor,
    index_value,
    lease_deadline,
    settled,
    workflow_item_id,
)
from worlds.sqlite import codecs
from worlds.sqlite import schedules as schedule_ops
from worlds.sqlite import statements as sql
from worlds.sqlite.connection import Connection, parse_url
from worlds.sqlite.filters import list_runs_sql, match_counts_sql
from worlds.sqlite.schema import SCHEMA_VERSION
from worlds.sqlite.transactions import (
    RollbackError,
    WouldBlockError,
    Writer,
    new_token,
    run_once,
)
from worlds.types import (
    AttributeValue,
    Claim,
    ClaimConflict,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookDelivery,
    HookReceived,
    HookRecord,
    HookStartResult,
    NewWorkItem,
    ReuseWindow,
    RunPage,
    RunQuery,
    RunRecord,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    StepStarted,
    StreamChunk,
    WorkItem,
    utcnow,
)

__all__ = ["SqliteWorld"]


@translates_errors
class SqliteWorld(ClosesOnExit):
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

    def __repr__(self) -> str:
        return f"SqliteWorld({redact_url(self.url)!r})"

    async def close(self) -> None:
        """Close the connection; later calls raise ``WorldClosedError``."""
        await self._connection.close()

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

    # ------------------------------------------------------------------ runs

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run`` and ``StartPolicy`` (a takeover of the policy's key)."""
        self._connection.check_open()
        requests.check_create(request)

        task = runs.first_task_commit(request)

        def body(tx: Writer) -> CreateRunResult:
            return self._create_in(tx, request, task)

        return await self._connection.write(body)

    def _create_in(
        self, tx: Writer, request: CreateRunRequest, task: CommitRequest | None
    ) -> CreateRunResult:
        """``create_run``'s transaction (its checks done): claims by the start policy,
        debounce, limited pairs' slots, the run, and its first task run ahead (``task``)."""
        attributes = dict(request.attributes)
        ivalues = {key: index_value(value) for key, value in attributes.items()}
        db, run_id = tx.db, request.run_id
        if request.first is not None and task is not None:
            tx.now, tx.now_us = request.first.at, codecs.to_micros(request.first.at)
        debounced = None if request.debounce is None else tx.debounce(request)
        if isinstance(debounced, CreateRunResult):
            return debounced
        try:
            db.execute(
                sql.INSERT_RUN, (run_id, request.workflow, tx.now_us, codecs.encode(attributes))
            )
        except sqlite3.IntegrityError:
            raise requests.run_exists(run_id) from None
        superseded = None
        for key in sorted(request.unique):
            value, claim = attributes[key], (key, ivalues[key])
            encoded = codecs.encode(value)
            window = request.windows.get(key, ReuseWindow())
            reuse = (window.ttl, claims.encode_release_on(window.release_on))
            if db.execute(sql.CLAIM_IF_FREE, (*claim, encoded, run_id, *reuse)).rowcount:
                continue
            held = codecs.held_from_row(db.execute(sql.GET_CLAIM, claim).fetchone())
            holder_id = held.run_id
            assert holder_id is not None  # CLAIM_IF_FREE takes released pairs
            if debounced is not None and request.debounce and key == request.debounce.key:
                generation = debounced.generation  # the holder keeps running
            elif claims.is_free(held, tx.now):
                generation = claims.next_generation(held)
            else:
                pruned = held.pruned_status is not None
                status = held.pruned_status
                if not pruned:
                    row = db.execute(sql.GET_RUN, (holder_id,)).fetchone()
                    status = codecs.run_from_row(row).status
                taken = claims.on_create(
                    request.policy,
                    key,
                    value,
                    (holder_id, held.generation),
                    status,
                    run_id,
                    pruned,
                )
                if isinstance(taken, ClaimConflict):
                    raise RollbackError(CreateRunResult(conflict=taken))
                if taken.cancel_reason is not None:
                    tx.cancel(holder_id, taken.cancel_reason)
                    superseded = holder_id
                generation = taken.generation
            params = (*claim, encoded, run_id, generation, None, None, *reuse)
            db.execute(sql.PUT_CLAIM, params)
        admitted, positions = tx.admit(request) if request.limits else ("hold", {})
        if isinstance(admitted, ClaimConflict):
            raise RollbackError(CreateRunResult(conflict=admitted))
        if request.limits:
            tx.take_slots(request, positions, holding=admitted == "hold")
        if ivalues:
            db.executemany(sql.UPSERT_ATTRIBUTE, [(run_id, key, iv) for key, iv in ivalues.items()])
        stored = runs.created_event(request.workflow, request.args, attributes, tx.now)
        tx.rows.append((run_id, 1, "run_created", codecs.encode(stored)))
        tx.flush_events()
        run = runs.new_run(run_id, request.workflow, attributes, tx.now)
        leased = None
        if task is not None:
            deadline = runs.deadline_item(request)
            if deadline is not None:
                run, _ = tx.enqueue(run, deadline, "", 0.0)
            first = self._commit_in(tx, task)
            return CreateRunResult(run=run, superseded_run_id=superseded, first=first)
        if admitted == "hold" and runs.runs_ahead(request):
            assert request.lease_to is not None
            wake = NewWorkItem(kind="workflow", lease=True)
            run, leased = tx.enqueue(run, wake, request.lease_to, request.lease_seconds)
        elif admitted == "hold":
            item = (run_id, workflow_item_id(run_id), "workflow", request.workflow, 0, 1)
            start_at = request.start_at
            if request.debounce is not None:
                start_at = claims.first_start(request.debounce, tx.now)
            due = tx.now_us if start_at is None else codecs.to_micros(start_at)
            db.execute(sql.INSERT_WORK_IF_ABSENT, (*item, b"", due, None, 0, None, 0))
            tx.signals.add(WORK_TOPIC)
        deadline = runs.deadline_item(request)
        if deadline is not None:
            tx.enqueue(run, deadline, "", 0.0)
        return CreateRunResult(run=run, superseded_run_id=superseded, leased=leased)

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        self._connection.check_open()
        return await self._connection.write(lambda tx: self._commit_in(tx, request))

    async def commit_many(self, requests: Sequence[CommitRequest]) -> list[batches.Outcome]:
        """See ``World.commit_many``: one transaction (one fsync) for the batch, each
        request in a savepoint of its own, so a failing one leaves no trace."""
        self._connection.check_open()
        batch = batches.check_batch(requests)

        def body(tx: Writer) -> list[batches.Outcome]:
            outcomes: list[batches.Outcome] = []
            for request in batch:
                signals, rows = set(tx.signals), list(tx.rows)
                tx.db.execute("SAVEPOINT request")
                try:
                    outcomes.append(self._commit_in(tx, request))
                except Exception as exc:
                    if isinstance(exc, WouldBlockError) or batches.is_world_failure(exc):
                        raise
                    tx.db.execute("ROLLBACK TO request")
                    tx.signals, tx.rows = signals, rows
                    outcomes.append(exc)
                tx.db.execute("RELEASE request")
            return outcomes

        return await self._connection.write(body)

    def _commit_in(self, tx: Writer, request: CommitRequest) -> CommitResult:
        """``request`` applied in transaction ``tx``."""
        lease = request.lease
        lease_key = (
            (None, None, None) if lease is None else (lease.id, request.worker_id, lease.token)
        )

        def body(tx: Writer) -> CommitResult:
            db = tx.db
            row = db.execute(sql.GET_RUN_FOR_COMMIT, (request.run_id, *lease_key)).fetchone()
            if row is None:
                raise LookupError(f"unknown run {request.run_id}")
            run = codecs.run_from_row(row)
            if run.status.is_closed:
                if request.discard is None:
                    return commits.closed(run.status)
                run, stored = tx.stamp(run, request.discard)
                tx.save_run(run, None)
                return commits.closed(run.status, stored)
            held_kind, rewake = row["kind"], row["rewake"]
            if lease is not None and (held_kind is None or lease.run_id != run.id):
                owner = db.execute(sql.LEASE_HOLDER, (lease.run_id, lease.id)).fetchone()
                holder = None if owner is None else owner["owner"]
                discard = request.discard
                if discard is None:
                    return commits.lost(run.status, holder)
                logged = db.execute(sql.READ_EVENTS, (run.id, 0)).fetchall()
                if settled(
                    (codecs.decode_event(row["data"]) for row in logged),
                    discard.step,
                    discard.attempt,
                ):
                    return commits.lost(run.status, holder)
                run, stored = tx.stamp(run, discard)
                tx.save_run(run, None)
                return commits.lost(run.status, holder, stored)
            if request.expect_seq is not None:
                rows = db.execute(sql.READ_EVENTS, (run.id, request.expect_seq - 1)).fetchall()
                if commits.stale(request, (codecs.decode_event(r["data"]) for r in rows)):
                    return commits.stale_result(run.status)
            held = None if lease is None else (held_kind, bool(rewake))
            done = tx.commit(commits.commit_flow(run, request, tx.now, held), request)
            changed = None
            if done.attributes:
                rows = [(run.id, key, index_value(v)) for key, v in done.attributes.items()]
                db.executemany(sql.UPSERT_ATTRIBUTE, rows)
                changed = codecs.encode(done.run.attributes)
            tx.save_run(done.run, changed)
            return done.result

        return body(tx)

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run``."""
        self._connection.check_open()
        return await self._connection.write(lambda tx: tx.cancel(run_id, reason))

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel``."""
        self._connection.check_open()
        return await self._connection.write(
            lambda tx: tx.request_cancel(run_id, reason, grace_seconds)
        )

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``.

        Items due at the same instant are leased in (run id, item id) order.
        """
        self._connection.check_open()
        wanted = sorted(set(names))
        if limit <= 0 or not wanted:
            return []
        free_sql, expired_sql = sql.due_work_sql(len(wanted))

        def due(db: sqlite3.Connection, now_us: int) -> list[sqlite3.Row]:
            params = (now_us, *wanted, limit)
            rows = db.execute(free_sql, params).fetchall()
            rows += db.execute(expired_sql, params).fetchall()
            rows.sort(key=lambda row: (row["available_at"], row["run_id"], row["id"]))
            return rows[:limit]

        def body(tx: Writer) -> list[WorkItem]:
            rows = due(tx.db, tx.now_us)
            expires = codecs.to_micros(lease_deadline(tx.now, lease_seconds))
            updates: list[tuple[object, ...]] = []
            items: list[WorkItem] = []
            started: dict[str, list[StepStarted]] = {}
            for row in rows:
                run_id, item_id, step = row["run_id"], row["id"], row["kind"] == "step"
                attempt = row["attempt"] + 1 if step and row["ever_leased"] else row["attempt"]
                token = new_token()
                lease = (row["available_at"], worker_id, token, expires, attempt, run_id, item_id)
                updates.append(lease)
                items.append(codecs.leased(row, attempt=attempt, token=token, expires=expires))
                if step:
                    begun = StepStarted(step=row["number"], attempt=attempt)
                    started.setdefault(run_id, []).append(begun)
            tx.db.executemany(sql.LEASE_WORK, updates)
            for run_id, events in started.items():
                bumped = tx.db.execute(sql.BUMP_LAST_SEQ, (len(events), run_id)).fetchone()
                last_seq = bumped["last_seq"]
                tx.stamp_new(run_id, last_seq - len(events), events)
            tx.flush_events()
            return items

        def run(db: sqlite3.Connection, blocking: bool) -> bool:
            return bool(run_once(lambda: due(db, codecs.to_micros(utcnow())), blocking))

        # Look before taking the write lock: idle workers polling an empty queue
        # must not serialize every other process behind them.
        if not await self._connection.run(run):
            return []
        return await self._connection.write(body)

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        self._connection.check_open()
        if not items:
            return []

        def body(tx: Writer) -> list[bool]:
            expires = codecs.to_micros(lease_deadline(tx.now, lease_seconds))
            return [
                tx.db.execute(
                    sql.RENEW_WORK, (expires, item.run_id, item.id, worker_id, item.token)
                ).rowcount
                == 1
                for item in items
            ]

        return await self._connection.write(body)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        self._connection.check_open()
        rows = [(item.run_id, item.id, worker_id, item.token) for item in items]

        def body(tx: Writer) -> None:
            if rows:
                tx.db.executemany(sql.RELEASE_WORK, rows)
            tx.signals.add(WORK_TOPIC)

        await self._connection.write(body)

    def now(self) -> datetime:
        """See ``World.now``: the host's clock."""
        return utcnow()

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``.

        Signals from any world object on the same file in this process wake
        the caller at once (or make the next ``wait`` return at once when
        nobody was waiting); changes made by other processes are noticed by
        returning after at most the ``poll`` interval, so callers re-check.
        """
        self._connection.check_open()
        await self._connection.hub.wait(topic, min(timeout, self.poll_interval))

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``World.get_run``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> RunRecord | None:
            row = db.execute(sql.GET_RUN, (run_id,)).fetchone()
            return None if row is None else codecs.run_from_row(row)

        return await self._connection.read(body)

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[EventKind]:
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
            attributes, rest = terms.index_terms(query.attributes, query.where)
            query = msgspec.structs.replace(query, attributes=attributes, where=rest)
        list_runs_sql(query, before)  # a malformed filter raises here, not in the reader

        def body(db: sqlite3.Connection) -> list[RunRecord]:
            ordered = query
            if len(query.attributes) > 1:
                counts = db.execute(*match_counts_sql(query.attributes)).fetchone()
                attributes = terms.most_selective_first(query.attributes, tuple(counts))
                ordered = msgspec.structs.replace(query, attributes=attributes)
            statement, params = list_runs_sql(ordered, before)
            return [codecs.run_from_row(row) for row in db.execute(statement, params)]

        found = await self._connection.read(body)
        page = tuple(found[: query.limit])
        more = len(found) > query.limit
        return RunPage(runs=page, next_cursor=encode_cursor(page[-1].id) if more else None)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        self._connection.check_open()
        params = (key, index_value(value))

        def body(db: sqlite3.Connection) -> Claim | None:
            row = db.execute(sql.GET_CLAIM, params).fetchone()
            if row is None or claims.is_free(codecs.held_from_row(row), utcnow()):
                return None  # never claimed, released or lapsed
            return codecs.claim_from_row(row)

        return await self._connection.read(body)

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``."""
        self._connection.check_open()

        def body(tx: Writer) -> str | None:
            if resume_id is not None:
                seen = tx.db.execute(sql.GET_RESUME, (token, resume_id)).fetchone()
                if seen is not None:
                    return str(seen["run_id"])
            found = tx.db.execute(sql.GET_HOOK, (token,)).fetchone()
            if found is None:
                return None
            run_id, number = found["run_id"], found["hook"]
            if resume_id is not None:
                tx.db.execute(sql.INSERT_RESUME, (token, resume_id, run_id))
            row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
            run = codecs.run_from_row(row)
            received = HookReceived(
                hook=number, payload=payload, resume_id=resume_id, token="" if number else token
            )
            run, _ = tx.stamp(run, received)
            run, _ = tx.enqueue(run, NewWorkItem(kind="workflow"), "", 0.0)
            tx.save_run(run, None)
            return str(run_id)

        return await self._connection.write(body)

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """See ``World.start_or_resume_hook``."""
        self._connection.check_open()
        key = resume.check_request(request)
        requests.check_create(request)
        claim = (key, index_value(request.attributes[key]))

        def body(tx: Writer) -> HookStartResult:
            if delivery.resume_id is not None:
                seen = tx.db.execute(sql.GET_RESUME, (delivery.token, delivery.resume_id))
                row = seen.fetchone()
                if row is not None:
                    return HookStartResult(run_id=str(row["run_id"]))
            held = tx.db.execute(sql.GET_CLAIM, claim).fetchone()
            if held is not None and held["run_id"] is not None:
                holder = tx.db.execute(sql.GET_RUN, (held["run_id"],)).fetchone()
                if resume.route(codecs.run_from_row(holder).status) == "deliver":
                    return tx.deliver(held["run_id"], delivery)
            hook = tx.db.execute(sql.GET_HOOK, (delivery.token,)).fetchone()
            if hook is not None:  # another run holds the token: create nothing
                return HookStartResult(run_id=hook["run_id"], hook_holder=hook["run_id"])
            created = self._create_in(tx, request, None)
            assert created.run is not None, "a conflict rolled the transaction back"
            delivered = tx.deliver(request.run_id, delivery)
            record = codecs.run_from_row(tx.db.execute(sql.GET_RUN, (request.run_id,)).fetchone())
            return msgspec.structs.replace(delivered, created=True, run=record)

        result = await self._connection.write(body)
        if isinstance(result, CreateRunResult):  # the policy refused to take the pair over
            assert result.conflict is not None
            return HookStartResult(run_id=result.conflict.holder_run_id)
        return result

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        """See ``World.reopen_run``."""
        self._connection.check_open()

        def body(tx: Writer) -> RunRecord | None:
            row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
            if row is None:
                return None
            run = codecs.run_from_row(row)
            logged = tx.db.execute(sql.READ_EVENTS, (run_id, 0)).fetchall()
            events = [codecs.decode_event(r["data"]) for r in logged]
            plan = reopen.plan_reopen(run, events, by)
            if plan.event is None:
                return run
            run, _ = tx.stamp(run, plan.event)
            for new in plan.work:
                run, _ = tx.enqueue(run, new, "", 0.0)
            tx.save_run(run, row["attributes"])
            return run

        return await self._connection.write(body)

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        """See ``World.fork_run``."""
        self._connection.check_open()

        def body(tx: Writer) -> RunRecord | None:
            db = tx.db
            row = db.execute(sql.GET_RUN, (source_run_id,)).fetchone()
            if row is None:
                return None
            source = codecs.run_from_row(row)
            logged = db.execute(sql.READ_EVENTS, (source_run_id, 0)).fetchall()
            events = [codecs.decode_event(r["data"]) for r in logged]
            plan = reopen.plan_fork(source, events, from_step, by)
            encoded = codecs.encode(plan.attributes)
            try:
                db.execute(sql.INSERT_RUN, (run_id, source.workflow, tx.now_us, encoded))
            except sqlite3.IntegrityError:
                raise requests.run_exists(run_id) from None
            created = runs.created_event(source.workflow, plan.args, plan.attributes, tx.now)
            tx.rows.append((run_id, 1, "run_created", codecs.encode(created)))
            run = runs.new_run(run_id, source.workflow, plan.attributes, tx.now)
            for event in plan.events:
                run, _ = tx.stamp(run, event)
            for new in plan.work:
                run, _ = tx.enqueue(run, new, "", 0.0)
            db.executemany(
                sql.UPSERT_ATTRIBUTE,
                [(run_id, key, index_value(value)) for key, value in run.attributes.items()],
            )
            tx.save_run(run, codecs.encode(run.attributes))
            return run

        return await self._connection.write(body)

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``."""
        self._connection.check_open()
        streams.check_name(name)

        def body(tx: Writer) -> int | None:
            row = tx.db.execute(sql.GET_RUN, (run_id,)).fetchone()
            if not streams.accepts(None if row is None else codecs.run_from_row(row).status):
                return None
            return tx.stream(run_id, name, chunks)

        return await self._connection.write(body)

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """See ``World.read_stream``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[StreamChunk]:
            rows = db.execute(sql.READ_STREAM, (run_id, name, max(start, 0), max(limit, 0)))
            return [
                StreamChunk(offset=row["seq"], data=row["data"], at=codecs.from_micros(row["at"]))
                for row in rows
            ]

        return await self._connection.read(body)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[HookRecord]:
            if run_id is None:
                rows = db.execute(sql.LIST_HOOKS).fetchall()
            else:
                rows = db.execute(sql.LIST_RUN_HOOKS, (run_id,)).fetchall()
            return [codecs.hook_from_row(row) for row in rows]

        return await self._connection.read(body)

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``; pairs with the same key come in value order."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[Claim]:
            now = codecs.to_micros(utcnow())
            rows = db.execute(sql.RUN_CLAIMS, (run_id, now))
            return [codecs.claim_from_row(row) for row in rows]

        return await self._connection.read(body)

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        self._connection.check_open()
        pair = (key, index_value(value))

        def body(db: sqlite3.Connection) -> list[Slot]:
            return [codecs.slot_from_row(row) for row in db.execute(sql.LIST_SLOTS, pair)]

        return await self._connection.read(body)

    async def run_slots(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        self._connection.check_open()

        def body(db: sqlite3.Connection) -> list[Slot]:
            return [codecs.slot_from_row(row) for row in db.execute(sql.RUN_SLOTS, (run_id,))]

        return await self._connection.read(body)

    # ------------------------------------------------------------------ retention

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_runs``; the runs that closed first go first."""
        self._connection.check_open()
        if limit <= 0:
            return []
        params = (codecs.to_micros(closed_before), limit)

        def body(tx: Writer) -> list[str]:
            pruned = [row["id"] for row in tx.db.execute(sql.PRUNABLE_RUNS, params)]
            tx.db.execute(sql.RELEASE_LAPSED_CLAIMS, (tx.now_us,))
            keep = sql.RELEASE_RUN_CLAIMS if release_claims else sql.TOMBSTONE_RUN_CLAIMS
            for statement in (keep, *sql.PRUNE_RUN):
                tx.db.executemany(statement, [(run_id,) for run_id in pruned])
            return pruned

        return await self._connection.write(body)

    # ------------------------------------------------------------------ schedules

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        self._connection.check_open()
        return await schedule_ops.create_schedule(self._connection, record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        self._connection.check_open()
        return await schedule_ops.get_schedule(self._connection, schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        self._connection.check_open()
        return await schedule_ops.list_schedules(self._connection, after, limit)

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        self._connection.check_open()
        return await schedule_ops.update_schedule(self._connection, record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        self._connection.check_open()
        return await schedule_ops.delete_schedule(self._connection, schedule_id)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        self._connection.check_open()
        return await schedule_ops.lease_schedules(
            self._connection, worker_id, names, limit, lease_seconds
        )
