"""Transaction steps: what the commit of a step that wrote to the world's database means.

A transaction step (``@transaction``) runs its function inside a write
transaction of the world's own database; the step's outcome is then committed
as an ordinary commit in that same transaction. Whether the transaction as a
whole commits follows from that commit's result (``after_commit``): accepted,
the function's writes and the outcome commit together; a conditional commit
the log had passed (``stale``) is undone alone and the caller commits again
without the condition; any other refusal (the lease lost, the run closed)
undoes everything, the function's writes with it, so a zombie's writes never
land. The lease is checked as the transaction opens too (``fence``), so a
step whose lease is gone does not even run. A world without a database
refuses transaction steps (``unsupported``).
"""

from __future__ import annotations

from typing import Literal

from worlds.errors import LeaseLostError, TransactionsUnsupportedError
from worlds.protocol import ISOLATION_LEVELS, Isolation
from worlds.types import CommitResult, RunRecord, WorkItem

__all__ = ["after_commit", "check_isolation", "fence", "unsupported"]

SUPPORTED = "an SQLite world (sqlite:///app.db) or a PostgreSQL world (postgresql://...)"
"""The worlds that run transaction steps, as the refusal names them."""


def fence(lease: WorkItem, run: RunRecord | None, held: bool) -> None:
    """Check, as a step's transaction opens, that its lease still holds: the run
    ``run`` is open and the item ``held`` by the lease (worker and fencing token).

    Raises:
        LeaseLostError: it does not; the step's function must not run.
    """
    if run is None or run.status.is_closed or not held:
        raise LeaseLostError(
            f"step {lease.number} of run {lease.run_id} (attempt {lease.attempt}) lost"
            " its lease before its transaction opened; nothing of it ran"
        )


def after_commit(result: CommitResult) -> Literal["commit", "again", "undo"]:
    """What the transaction of a step does after its outcome's commit gave ``result``.

    ``commit``: the commit was accepted; commit the transaction. ``again``: a
    conditional commit found the log moved on; undo that commit alone and keep
    the transaction open for another. ``undo``: refused (lease lost, run
    closed); roll the whole transaction back.
    """
    if result.ok:
        return "commit"
    if result.stale:
        return "again"
    return "undo"


def check_isolation(isolation: object) -> Isolation:
    """``isolation`` if it names an isolation level, else ``ValueError`` naming them."""
    for level in ISOLATION_LEVELS:
        if isolation == level:
            return level
    raise ValueError(
        f"isolation must be one of {', '.join(repr(i) for i in ISOLATION_LEVELS)},"
        f" not {isolation!r}"
    )


def unsupported(world: str) -> TransactionsUnsupportedError:
    """The refusal of ``world``, which keeps no database: one line naming those that run
    transaction steps."""
    return TransactionsUnsupportedError(
        f"{world} cannot run @transaction steps (it keeps no database): use {SUPPORTED}"
    )
