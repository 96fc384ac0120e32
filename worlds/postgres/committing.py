"""The commit paths of the PostgreSQL world: ``commit`` and ``commit_many``.

A commit the ``commit_run`` function can apply goes there in one round trip
(``fast.py``); the rest take the general path: the rows a rule needs read in
one transaction, ``commits.commit_flow`` driven, the outcome written. A batch
sends what qualifies to ``commit_runs`` in one call and the others in one
transaction, each in a savepoint of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

import asyncpg

from worlds._rules import batches, commits
from worlds.postgres import codecs
from worlds.postgres import statements as sql
from worlds.postgres.connection import RETRYABLE, retry
from worlds.postgres.fast import batch_params, commit_params, commit_result
from worlds.postgres.notices import Notices
from worlds.postgres.transactions import Tx
from worlds.protocol import WORK_TOPIC, run_topic
from worlds.semantics import index_value, settled
from worlds.types import CommitRequest, CommitResult

if TYPE_CHECKING:
    from worlds.postgres.connection import Pool

__all__ = ["CommitPaths"]

T = TypeVar("T")


class Write(Protocol):
    """``PostgresWorld._write``: run a body as one transaction, retried on races."""

    def __call__(self, body: Callable[[Tx], Awaitable[T]]) -> Awaitable[T]: ...


class CommitPaths:
    """``commit`` and ``commit_many`` over a PostgreSQL world's pool and notices."""

    def __init__(
        self,
        *,
        connect: Callable[[], Awaitable[Pool]],
        write: Write,
        notices: Notices,
        post: Callable[[Collection[str]], None],
        now: Callable[[], datetime],
        channels: tuple[str, str],
        fast_commits: bool,
    ) -> None:
        """The world's ``_connect``, ``_write``, notices, ``_post``, clock, its two
        notification channels, and whether commits may take ``commit_run``."""
        self._connect = connect
        self._write = write
        self._notices = notices
        self._post = post
        self._now = now
        self._channel, self._run_channel = channels
        self._fast_commits = fast_commits

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``."""
        args = None
        if self._fast_commits:
            args = commit_params(request, self._now(), self._channel, self._run_channel)
        if args is not None:
            pool = await self._connect()
            with self._notices.writing() as inline:
                if not inline:
                    args = args._replace(channel=None, run_channel=None)
                rows = await retry(pool.fetch, sql.COMMIT_RUN, *args)
            if not inline and rows[-1]["outcome"] == "ok":
                closed = [run_topic(request.run_id)] if args.closed is not None else []
                self._post([WORK_TOPIC, *closed] if rows[-1]["notify"] else closed)
            result = commit_result(request, rows, args)
            if result is not None:
                return result
        return await self._write(lambda tx: _commit_in(tx, request))

    async def commit_many(self, requests: Sequence[CommitRequest]) -> list[batches.Outcome]:
        """See ``World.commit_many``: the requests ``commit_run`` can apply go to
        ``commit_runs`` in one call (one round trip, one transaction); the others,
        and those it leaves to the general path (a lost lease, a late result,
        a recheck), follow in one transaction, each in a savepoint of its own.
        A failing ``commit_runs`` call sends the whole batch that second way."""
        batch = batches.check_batch(requests)
        if len(batch) < 2:
            return await batches.one_by_one(batch, self.commit)
        outcomes: list[batches.Outcome | None] = [None] * len(batch)
        if self._fast_commits:
            await self._commit_runs(batch, outcomes)
        rest = [n for n, outcome in enumerate(outcomes) if outcome is None]
        if rest:
            done = await self._commit_each([batch[n] for n in rest])
            for n, outcome in zip(rest, done, strict=True):
                outcomes[n] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    async def _commit_runs(
        self, batch: list[CommitRequest], outcomes: list[batches.Outcome | None]
    ) -> None:
        """Fill ``outcomes`` with what one ``commit_runs`` call answers for the
        requests of ``batch`` that qualify; the rest stay ``None``."""
        now = self._now()
        # A run with several requests keeps their order on the general path (the
        # call may hand one back after applying the next).
        counts = Counter(request.run_id for request in batch)
        calls = [
            commit_params(r, now, self._channel, self._run_channel)
            if counts[r.run_id] == 1
            else None
            for r in batch
        ]
        fast = [(n, args) for n, args in enumerate(calls) if args is not None]
        if not fast:
            return
        pool = await self._connect()
        with self._notices.writing() as inline:
            channels = (self._channel, self._run_channel) if inline else (None, None)
            params = batch_params([args for _, args in fast], *channels)
            try:
                rows = await retry(pool.fetch, sql.COMMIT_RUNS, *params)
            except Exception as exc:
                if batches.is_world_failure(exc):
                    raise
                return  # one request made the call fail: each takes the general path
        by_request: dict[int, list[asyncpg.Record]] = {}
        for row in rows:
            by_request.setdefault(row["req"], []).append(row)
        topics: set[str] = set()
        for req, (n, args) in enumerate(fast, start=1):
            request, mine = batch[n], by_request[req]
            last = mine[-1]
            if last["outcome"] == "ok":
                if last["notify"]:
                    topics.add(WORK_TOPIC)
                if args.closed is not None:
                    topics.add(run_topic(request.run_id))
            try:
                outcomes[n] = commit_result(request, mine, args)
            except LookupError as exc:
                outcomes[n] = exc
        if not inline:
            self._post(sorted(topics))

    async def _commit_each(self, batch: list[CommitRequest]) -> list[batches.Outcome]:
        """``batch`` on the general path in one transaction, a savepoint per request."""
        if len(batch) < 2:
            return await batches.one_by_one(batch, self.commit)

        async def body(tx: Tx) -> list[batches.Outcome]:
            outcomes: list[batches.Outcome] = []
            for request in batch:
                signals, pending = set(tx.signals), {k: list(v) for k, v in tx.pending.items()}
                savepoint = tx.conn.transaction()
                await savepoint.start()
                try:
                    outcome: batches.Outcome = await _commit_in(tx, request)
                except Exception as exc:
                    if isinstance(exc, RETRYABLE) or batches.is_world_failure(exc):
                        raise
                    await savepoint.rollback()
                    tx.signals, tx.pending = signals, pending
                    outcomes.append(exc)
                    continue
                await savepoint.commit()
                outcomes.append(outcome)
            return outcomes

        return await self._write(body)


async def _commit_in(tx: Tx, request: CommitRequest) -> CommitResult:
    """``request`` applied in transaction ``tx`` (the general path)."""
    lease = request.lease

    async def body(tx: Tx) -> CommitResult:
        found = await tx.lock_run(request.run_id)
        if found is None:
            raise LookupError(f"unknown run {request.run_id}")
        run, attributes = found
        if run.status.is_closed:
            if request.discard is None:
                return commits.closed(run.status)
            run, stored = tx.stamp(run, request.discard)
            await tx.save_run(run, attributes)
            return commits.closed(run.status, stored)
        held = None
        if lease is not None:
            held = await tx.conn.fetchrow(
                sql.LOCK_LEASE, lease.id, run.id, request.worker_id, lease.token
            )
            if held is None:
                holder: str | None = await tx.conn.fetchval(sql.LEASE_HOLDER, lease.id)
                discard = request.discard
                if discard is None:
                    return commits.lost(run.status, holder)
                rows = await tx.conn.fetch(sql.READ_EVENTS, run.id, 0)
                logged = (codecs.decode_event(row["data"]) for row in rows)
                if settled(logged, discard.step, discard.attempt):
                    return commits.lost(run.status, holder)
                run, stored = tx.stamp(run, discard)
                await tx.save_run(run, attributes)
                return commits.lost(run.status, holder, stored)
        if request.expect_seq is not None:
            rows = await tx.conn.fetch(sql.READ_EVENTS, run.id, request.expect_seq - 1)
            later = (codecs.decode_event(r["data"], r["seq"], r["at"]) for r in rows)
            if commits.stale(request, later):
                return commits.stale_result(run.status)
        item = None if held is None else (held["kind"], bool(held["rewake"]))
        done = await tx.commit(commits.commit_flow(run, request, tx.now, item), request)
        if done.attributes:
            keys = list(done.attributes)
            ivalues = [index_value(done.attributes[key]) for key in keys]
            await tx.conn.execute(sql.UPSERT_ATTRIBUTES, run.id, keys, ivalues)
            attributes = codecs.encode(done.run.attributes)
        await tx.save_run(done.run, attributes)
        return done.result

    return await body(tx)
