"""What a commit does: refused on a closed run or a lost lease, else appended."""

from __future__ import annotations

from typing import Literal

from worlds.types import CommitRequest, CommitResult, EventKind, RunContinued, RunStatus

__all__ = ["after_ack", "closed", "lost", "successors"]


def closed(status: RunStatus, discard: EventKind | None = None) -> CommitResult:
    """The result of a commit to a closed run: refused, with its discard if stored."""
    return CommitResult(ok=False, status=status, events=() if discard is None else (discard,))


def lost(status: RunStatus) -> CommitResult:
    """The result of a commit whose lease (id, worker, fencing token) is no longer held."""
    return CommitResult(ok=False, status=status, lease_lost=True)


def after_ack(kind: str, rewake: bool) -> Literal["rewake", "delete"]:
    """What an acknowledged lease does to its item.

    A workflow item woken while leased is made due again; any other is deleted.
    """
    return "rewake" if kind == "workflow" and rewake else "delete"


def successors(request: CommitRequest) -> list[str]:
    """The run ids ``request`` starts by continuing as new (each must be new)."""
    return [event.next_run_id for event in request.events if isinstance(event, RunContinued)]
