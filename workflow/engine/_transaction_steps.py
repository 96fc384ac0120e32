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
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from workflow._app_database import open_app_transaction
from workflow.engine._commits import describe_work
from workflow.engine._committer import Committer
from workflow.engine._faults import Backoff, is_fatal, is_transient
from workflow.engine._one_transaction import StepWithWorkflow
from workflow.engine._step import completed_commit, failed_commit, run_step
from workflow.errors import FatalError
from workflow.transactions import Transaction, TransactionDefinition, using
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


class TransactionSteps:
    """Runs the attempts of a worker's ``@transaction`` steps."""

    def __init__(
        self,
        world: World,
        committer: Committer,
        step_with_workflow: StepWithWorkflow,
        lease_seconds: float,
    ) -> None:
        self._world = world
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
        worker_id = self._committer.worker_id
        conflicts = 0
        backoff = Backoff(first=0.002, cap=CONFLICT_BACKOFF_CAP)
        while True:
            try:
                return await self._once(item, step, cancel_scope, wake_eagerly, run)
            except _Undo as undo:
                return await self._committer.commit(item, undo.request)
            except LeaseLostError:
                log.info(
                    "worker %s: %s lost its lease before its transaction opened; not run",
                    worker_id,
                    describe_work(item),
                )
                return []
            except TransactionsUnsupportedError as exc:
                refused = FatalError(str(exc))
                request = failed_commit(
                    item, step, refused, worker_id, self._lease_seconds, wake_eagerly
                )
                return await self._committer.commit(item, request)
            except (_Again, TransactionConflictError) as exc:
                conflicts += 1
                if conflicts > CONFLICT_RETRIES:
                    error = TransactionConflictError(
                        f"transaction step {step.name!r} conflicted with other transactions"
                        f" {conflicts} times in a row"
                    )
                    if isinstance(exc, TransactionConflictError):
                        error.__cause__ = exc
                    request = failed_commit(
                        item, step, error, worker_id, self._lease_seconds, wake_eagerly
                    )
                    return await self._committer.commit(item, request)
                await anyio.sleep(backoff.next())
            except Exception as exc:
                # the world failed around the function (a lost connection, a full
                # disk): nothing committed that the fence would not catch; try again
                if is_fatal(exc) is not None or not is_transient(exc):
                    raise
                log.debug("worker %s: %s: %r; again", worker_id, describe_work(item), exc)
                await anyio.sleep(backoff.next())

    async def _once(
        self,
        item: WorkItem,
        step: TransactionDefinition[..., Any],
        cancel_scope: anyio.CancelScope,
        wake_eagerly: bool,
        run: RunMetadata | None,
    ) -> list[WorkItem]:
        """One try: the attempt in a new transaction, and its commit there."""
        if step.database is not None:
            return await self._in_app_database(
                step.database, item, step, cancel_scope, wake_eagerly, run
            )
        world, worker_id = self._world, self._committer.worker_id
        async with world.transaction(item, worker_id, step.isolation) as open_tx:
            self.open.add(item.id)
            try:
                return await self._attempt(item, step, cancel_scope, wake_eagerly, run, open_tx)
            finally:
                self.open.discard(item.id)

    async def _attempt(
        self,
        item: WorkItem,
        step: TransactionDefinition[..., Any],
        cancel_scope: anyio.CancelScope,
        wake_eagerly: bool,
        run: RunMetadata | None,
        open_tx: OpenTransaction,
    ) -> list[WorkItem]:
        """The attempt's function run in ``open_tx``, and its outcome committed there."""
        world, worker_id = self._world, self._committer.worker_id
        with using(Transaction(open_tx, step.isolation)):
            request = await run_step(
                world,
                worker_id,
                item,
                step,
                cancel_scope,
                self._lease_seconds,
                wake_eagerly,
                run,
            )
        if open_tx.conflicted:
            raise _Again
        if not (len(request.events) == 1 and isinstance(request.events[0], StepCompleted)):
            raise _Undo(request)  # raised, cancelled: rolled back, recorded the usual way
        return await self._commit(item, request, open_tx)

    async def _in_app_database(
        self,
        database: str,
        item: WorkItem,
        step: TransactionDefinition[..., Any],
        cancel_scope: anyio.CancelScope,
        wake_eagerly: bool,
        run: RunMetadata | None,
    ) -> list[WorkItem]:
        """One try on an application database: the function and its recorded output
        in that database's transaction (or the output an earlier attempt recorded),
        then the outcome copied to the world's log the ordinary way."""
        worker_id = self._committer.worker_id
        async with open_app_transaction(database, step.isolation) as tx:
            recorded = await tx.recorded(item.run_id, item.number)
            if recorded is None:
                with using(Transaction(tx, step.isolation)):
                    request = await run_step(
                        self._world,
                        worker_id,
                        item,
                        step,
                        cancel_scope,
                        self._lease_seconds,
                        wake_eagerly,
                        run,
                    )
                if tx.conflicted:
                    raise _Again
                outcome = request.events[0] if len(request.events) == 1 else None
                if not isinstance(outcome, StepCompleted):
                    raise _Undo(request)
                await tx.record(item.run_id, item.number, outcome.result)
            else:  # an attempt that died before copying it committed this output
                request = completed_commit(
                    item, recorded, worker_id, self._lease_seconds, wake_eagerly
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
