"""The commit paths of the PostgreSQL world: ``commit`` and ``commit_many``.

A commit the ``commit_run`` function can apply goes there in one round trip
(``fast.py``); the rest take the commit flow (``worlds._flows.commit``) in one
transaction. A batch sends what qualifies to ``commit_runs`` in one call and
the others through ``commit_each``, in one transaction, each in a savepoint
of its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

import asyncpg

from worlds._flows import commit as flow
from worlds._flows.commit import Outcome
from worlds.postgres import statements as sql
from worlds.postgres.connection import retry
from worlds.postgres.fast import batch_params, commit_params, commit_result
from worlds.postgres.notices import Notices
from worlds.postgres.rows import PostgresRows
from worlds.protocol import WORK_TOPIC, run_topic
from worlds.types import CommitRequest, CommitResult

if TYPE_CHECKING:
    from worlds.postgres.connection import Pool

__all__ = ["CommitPaths"]

T = TypeVar("T")


class Write(Protocol):
    """``PostgresWorld._write``: run a body as one transaction, retried on races."""

    def __call__(self, body: Callable[[PostgresRows], Awaitable[T]]) -> Awaitable[T]: ...


class CommitPaths:
    """``commit`` and ``commit_many`` over a PostgreSQL world's pool and notices."""

    def __init__(
        self,
        *,
        connect: Callable[[], Awaitable[Pool]],
        write: Write,
        notices: Notices,
        post: Callable[[Collection[str]], None],
        closed_here: Callable[[Collection[str]], None],
        runs_here: Callable[[str], bool],
        now: Callable[[], datetime],
        channels: tuple[str, str],
        fast_commits: bool,
    ) -> None:
        """The world's ``_connect``, ``_write``, notices, ``_post``, what wakes its own
        waiters on runs it closed (``Listener.closed_here``), whether its own Worker
        runs a run (``Listener.runs_here``), clock, its two
        notification channels, and whether commits may take ``commit_run``."""
        self._connect = connect
        self._write = write
        self._notices = notices
        self._post = post
        self._closed_here = closed_here
        self._runs_here = runs_here
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
            # the close of a run this world object's own Worker runs wakes its
            # waiters here; it notifies nobody (see ``Listener.runs_here``)
            here = args.closed is not None and self._runs_here(request.run_id)
            with self._notices.writing() as inline:
                if not inline:
                    args = args._replace(channel=None, run_channel=None)
                elif here:
                    args = args._replace(run_channel=None)
                rows = await retry(pool.fetch, sql.COMMIT_RUN, *args)
            if rows[-1]["outcome"] == "ok":
                closed = [run_topic(request.run_id)] if args.closed is not None else []
                self._closed_here(closed)
                if here:
                    closed = []
                if not inline:
                    self._post([WORK_TOPIC, *closed] if rows[-1]["notify"] else closed)
            result = commit_result(request, rows, args)
            if result is not None:
                return result
        return await self._write(lambda rows: flow.commit(rows, request))

    async def commit_many(self, requests: Sequence[CommitRequest]) -> list[Outcome]:
        """See ``World.commit_many``: the requests ``commit_run`` can apply go to
        ``commit_runs`` in one call (one round trip, one transaction); the others,
        and those it leaves to the general path (a lost lease, a late result,
        a recheck), follow in one transaction, each in a savepoint of its own.
        A failing ``commit_runs`` call sends the whole batch that second way."""
        batch = flow.check_batch(requests)
        if len(batch) < 2:
            return await flow.one_by_one(batch, self.commit)
        outcomes: list[Outcome | None] = [None] * len(batch)
        if self._fast_commits:
            await self._commit_runs(batch, outcomes)
        rest = [n for n, outcome in enumerate(outcomes) if outcome is None]
        if rest:
            done = await self._commit_each([batch[n] for n in rest])
            for n, outcome in zip(rest, done, strict=True):
                outcomes[n] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    async def _commit_runs(
        self, batch: list[CommitRequest], outcomes: list[Outcome | None]
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
        # by run id: every path locks runs in that order, so two never deadlock
        fast = sorted(
            ((n, args) for n, args in enumerate(calls) if args is not None),
            key=lambda entry: batch[entry[0]].run_id,
        )
        if not fast:
            return
        pool = await self._connect()
        with self._notices.writing() as inline:
            channels = (self._channel, self._run_channel) if inline else (None, None)
            params = batch_params([args for _, args in fast], *channels)
            try:
                rows = await retry(pool.fetch, sql.COMMIT_RUNS, *params)
            except Exception as exc:
                if flow.is_world_failure(exc):
                    raise
                return  # one request made the call fail: each takes the general path
        by_request: dict[int, list[asyncpg.Record]] = {}
        for row in rows:
            by_request.setdefault(row["req"], []).append(row)
        topics: set[str] = set()
        closed: set[str] = set()
        for req, (n, args) in enumerate(fast, start=1):
            request, mine = batch[n], by_request[req]
            last = mine[-1]
            if last["outcome"] == "ok":
                if last["notify"]:
                    topics.add(WORK_TOPIC)
                if args.closed is not None:
                    closed.add(run_topic(request.run_id))
                    if not self._runs_here(request.run_id):
                        topics.add(run_topic(request.run_id))
            try:
                outcomes[n] = commit_result(request, mine, args)
            except LookupError as exc:
                outcomes[n] = exc
        self._closed_here(closed)
        if not inline:
            self._post(sorted(topics))

    async def _commit_each(self, batch: list[CommitRequest]) -> list[Outcome]:
        """``batch`` through the commit flow in one transaction, a savepoint per request."""
        if len(batch) < 2:
            return await flow.one_by_one(batch, self.commit)
        return await self._write(lambda rows: flow.commit_each(rows, batch))
