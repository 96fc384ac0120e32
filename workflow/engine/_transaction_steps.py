"""Transaction steps: an attempt's function run inside a world transaction, its outcome
committed in that transaction.

For a ``@transaction`` step the worker asks the world for a write transaction
fenced by the step's lease (``World.transaction``), runs the attempt there
(``run_step``, with ``get_transaction()`` bound to it) and, when the function
returned, commits the outcome in the same transaction: with the workflow's
next commands when the run is cached here (``StepWithWorkflow``, one
conditional commit), else alone. The function's writes and its recorded
result are then durable together, or not at all.

An attempt whose function raised (or was cancelled) is rolled back and its
outcome (a retry, the step's failure, a discard) committed the ordinary way.
A transaction the database undid to resolve a conflict (PostgreSQL: a
serialization failure, a deadlock), or that failed to commit for a passing
world error, is run again from the start without counting an attempt: the
lease fence at the start of the next try makes sure a transaction that did
commit is not applied twice. After ``CONFLICT_RETRIES`` conflicts in a row the
attempt fails as if the function had raised the conflict (and is retried on
the step's own schedule). A world that keeps no database fails the step for
good, naming the worlds that can run it.

With ``@transaction(database=...)`` the transaction is the application
database's (``workflow/_app_database.py``): the function's writes and its
recorded output commit there, and the outcome is then committed to the log
the ordinary way; an output found recorded is copied without running again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio

from workflow._app_database import open_app_transaction
from workflow.engine._commits import describe_work
from workflow.engine._committer import Committer
from workflow.engine._faults import Backoff, is_fatal, is_transient
from workflow.engine._one_transaction import StepWithWorkflow
from workflow.engine._step import completed_commit, failed_commit, run_step
from workflow.errors import FatalError
from workflow.transactions import Statements, Transaction, TransactionDefinition, using
from workflow.types import RunMetadata
from worlds.errors import LeaseLostError, TransactionConflictError, TransactionsUnsupportedError
from worlds.protocol import OpenTransaction, World
from worlds.types import CommitRequest, CommitResult, StepCompleted, WorkItem

__all__ = ["CONFLICT_RETRIES", "TransactionSteps"]

log = logging.getLogger("workflow.worker")

CONFLICT_RETRIES = 64
"""Conflicts in a row (serialization failures, deadlocks) a transaction step's attempt
rides out, running its function again each time, before the attempt fails. Many
steps updating one hot row at ``REPEATABLE READ`` each lose about once per other
contender, so the bound is generous; the backoff (jittered, doubling up to
``CONFLICT_BACKOFF_CAP``) spreads the contenders out."""

CONFLICT_BACKOFF_CAP = 0.25
"""The longest pause, in seconds, between two tries of a conflicting transaction."""


class _Undo(Exception):  # noqa: N818 - an instruction, not an error
    """Leave the transaction rolled back; ``request`` is committed the ordinary way."""

    def __init__(self, request: CommitRequest) -> None:
        super().__init__()
        self.request = request


class _Again(Exception):  # noqa: N818 - an instruction, not an error
    """The transaction was undone by a conflict: run the attempt again."""


@dataclass(frozen=True)
class _Attempt:
    """One attempt to run: the leased item, its step and what ``run_step`` needs."""

    item: WorkItem
    step: TransactionDefinition[..., Any]
    cancel_scope: anyio.CancelScope
    wake_eagerly: bool
    run: RunMetadata | None


class TransactionSteps:
    """Runs the attempts of a worker's ``@transaction`` steps."""

    def __init__(
        self,
        world: World,
        committer: Committer,
        step_with_workflow: StepWithWorkflow,
        lease_seconds: float,
        build_id: str | None = None,
    ) -> None:
        self._world = world
        self._build_id = build_id
        """The worker's build, recorded in each ``StepCompleted`` like an ordinary
        step's (RFC 0025)."""
        self._committer = committer
        self._step_with_workflow = step_with_workflow
        self._lease_seconds = lease_seconds
        self.open: set[str] = set()
        """The ids of the items whose transaction is open: their rows are locked by
        it, so nobody can take them over and the worker need not renew them (a
        renewal would wait for the transaction, or make it conflict)."""

    async def run(
        self,
        item: WorkItem,
        step: TransactionDefinition[..., Any],
        cancel_scope: anyio.CancelScope,
        wake_eagerly: bool,
        run: RunMetadata | None,
    ) -> list[WorkItem]:
        """Run one attempt of ``step`` leased as ``item`` and commit it; the items leased.

        ``run``: what the worker knows of the step's run (else it is read).
        """
        attempt = _Attempt(item, step, cancel_scope, wake_eagerly, run)
        conflicts = 0
        backoff = Backoff(first=0.002, cap=CONFLICT_BACKOFF_CAP)
        while True:
            try:
                if step.database is not None:
                    return await self._in_app_database(step.database, attempt)
                return await self._in_world(attempt)
            except _Undo as undo:
                return await self._committer.commit(item, undo.request)
            except LeaseLostError:
                log.info(
                    "worker %s: %s lost its lease before its transaction opened; not run",
                    self._committer.worker_id,
                    describe_work(item),
                )
                return []
            except TransactionsUnsupportedError as exc:
                return await self._fail(attempt, FatalError(str(exc)))
            except (_Again, TransactionConflictError) as exc:
                conflicts += 1
                if conflicts > CONFLICT_RETRIES:
                    error = TransactionConflictError(
                        f"transaction step {step.name!r} conflicted with other transactions"
                        f" {conflicts} times in a row"
                    )
                    error.__cause__ = exc if isinstance(exc, TransactionConflictError) else None
                    return await self._fail(attempt, error)
                await anyio.sleep(backoff.next())
            except Exception as exc:
                # the world failed around the function (a lost connection, a full
                # disk): nothing committed that the fence would not catch; try again
                if is_fatal(exc) is not None or not is_transient(exc):
                    raise
                log.debug(
                    "worker %s: %s: %r; again", self._committer.worker_id, describe_work(item), exc
                )
                await anyio.sleep(backoff.next())

    async def _fail(self, attempt: _Attempt, error: Exception) -> list[WorkItem]:
        """Commit the attempt as failed with ``error`` (retried as the step's own)."""
        request = failed_commit(
            attempt.item,
            attempt.step,
            error,
            self._committer.worker_id,
            self._lease_seconds,
            attempt.wake_eagerly,
        )
        return await self._committer.commit(attempt.item, request)

    async def _call(
        self, attempt: _Attempt, statements: Statements, conflicted: Callable[[], bool]
    ) -> CommitRequest:
        """Run the attempt's function with ``get_transaction()`` on ``statements``; the
        commit of its result. ``_Again`` if the transaction conflicted meanwhile,
        ``_Undo`` with its outcome's commit if it raised or was cancelled."""
        with using(Transaction(statements, attempt.step.isolation)):
            request = await run_step(
                self._world,
                self._committer.worker_id,
                attempt.item,
                attempt.step,
                attempt.cancel_scope,
                self._lease_seconds,
                attempt.wake_eagerly,
                attempt.run,
                self._build_id,
            )
        if conflicted():
            raise _Again
        if not (len(request.events) == 1 and isinstance(request.events[0], StepCompleted)):
            raise _Undo(request)  # raised, cancelled: rolled back, recorded the usual way
        return request

    async def _in_world(self, attempt: _Attempt) -> list[WorkItem]:
        """One try in the world's database: the function and its outcome's commit in
        one transaction of the world."""
        item = attempt.item
        worker_id = self._committer.worker_id
        async with self._world.transaction(item, worker_id, attempt.step.isolation) as open_tx:
            self.open.add(item.id)
            try:
                request = await self._call(attempt, open_tx, lambda: open_tx.conflicted)
                return await self._commit(item, request, open_tx)
            finally:
                self.open.discard(item.id)

    async def _in_app_database(self, database: str, attempt: _Attempt) -> list[WorkItem]:
        """One try on an application database: the function and its recorded output
        in that database's transaction (or the output an earlier attempt recorded),
        then the outcome copied to the world's log the ordinary way."""
        item = attempt.item
        async with open_app_transaction(database, attempt.step.isolation) as tx:
            recorded = await tx.recorded(item.run_id, item.number)
            if recorded is None:
                request = await self._call(attempt, tx, lambda: tx.conflicted)
                outcome = request.events[0]
                assert isinstance(outcome, StepCompleted)
                await tx.record(item.run_id, item.number, outcome.result)
            else:  # an attempt that died before copying it committed this output
                request = completed_commit(
                    item,
                    recorded,
                    self._committer.worker_id,
                    self._lease_seconds,
                    attempt.wake_eagerly,
                    self._build_id,
                )
        combined = await self._step_with_workflow.commit(item, request)
        if combined is not None:
            return combined
        return await self._committer.commit(item, request)

    async def _commit(
        self, item: WorkItem, request: CommitRequest, open_tx: OpenTransaction
    ) -> list[WorkItem]:
        """Commit ``request`` in ``open_tx``: with the workflow's next commands where
        the run is cached here, else alone."""
        results: list[CommitResult] = []

        async def commit_in_transaction(combined: CommitRequest) -> CommitResult:
            result = await open_tx.commit(combined)
            results.append(result)
            return result

        leased = await self._step_with_workflow.commit(item, request, commit_in_transaction)
        if open_tx.conflicted:
            raise _Again
        if results and not results[-1].stale:  # the transaction ended in that commit
            return self._settled(item, request, results[-1], leased or [])
        result = await open_tx.commit(request)
        return self._settled(item, request, result, list(result.leased))

    def _settled(
        self, item: WorkItem, request: CommitRequest, result: CommitResult, leased: list[WorkItem]
    ) -> list[WorkItem]:
        """What the transaction's commit did; a refused one (lease lost, run closed)
        wrote nothing at all, its discard included: that is recorded the usual way."""
        if result.ok:
            return leased
        discard = CommitRequest(
            run_id=item.run_id,
            worker_id=self._committer.worker_id,
            lease=item,
            ack=False,
            discard=request.discard,
        )
        raise _Undo(discard)
