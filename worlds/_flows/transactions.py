"""Committing a transaction step: its outcome in the transaction holding its writes.

The backend opens the write transaction, checks the lease (``fence``) and
runs the step's function in it; ``commit_step`` then applies the step's
``CommitRequest`` there, the way
``commit.commit`` applies any commit (the lease fence included), and asks
``transactions.after_commit`` what the transaction does: commit (the backend
commits: the function's writes and the outcome together), commit again (a
stale conditional commit undone alone), or undo everything (``Rollback``).
"""

from __future__ import annotations

from worlds._flows import commit
from worlds._flows.rows import Rollback, Rows
from worlds._rules import transactions
from worlds.errors import TransactionsUnsupportedError
from worlds.protocol import Isolation
from worlds.types import CommitRequest, CommitResult, WorkItem

__all__ = ["check_isolation", "commit_step", "fence", "unsupported"]


async def fence(rows: Rows, lease: WorkItem, worker_id: str) -> None:
    """As a step's transaction opens: its run and item read (and locked, where the
    backend locks rows) and the lease checked (``transactions.fence``).

    Raises:
        LeaseLostError: the lease is no longer held.
    """
    found = await rows.commit_target(lease.run_id, lease, worker_id)
    run = None if found is None else found[0]
    transactions.fence(lease, run, found is not None and found[1] is not None)


async def commit_step(rows: Rows, request: CommitRequest) -> CommitResult:
    """See ``OpenTransaction.commit``: ``request`` applied in the step's open
    transaction of ``rows``.

    Returns the result of an accepted commit (the caller commits the
    transaction) or of a stale one (undone alone; the transaction stays open).

    Raises:
        Rollback: the commit was refused (lease lost, run closed); its result.
    """
    savepoint = await rows.savepoint()
    result = await commit.commit(rows, request)
    match transactions.after_commit(result):
        case "commit":
            await rows.release(savepoint)
        case "again":
            await rows.rollback_to(savepoint)
        case "undo":
            raise Rollback(result)
    return result


def check_isolation(isolation: object) -> Isolation:
    """See ``transactions.check_isolation``."""
    return transactions.check_isolation(isolation)


def unsupported(world: str) -> TransactionsUnsupportedError:
    """See ``transactions.unsupported``."""
    return transactions.unsupported(world)
