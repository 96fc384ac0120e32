"""Child runs: how a closing run tells its parent, and which children close with it.

A child run is an ordinary run whose attributes link it to its parent:
``$parent`` names the parent run and ``$on_parent_close`` says what happens to
the child when the parent closes as failed or cancelled (``cancel``, the
default, or ``abandon``). The attributes are indexed like any other, so a
world finds a run's children with its attribute index and needs no new table.

In the transaction that appends a run's closing event, a world:

1. asks ``closed_notice`` whether the run is a child; if its parent is still
   open (``accepts_notice``) it appends the ``ChildClosed`` to the parent and
   wakes the parent's workflow (a workflow work item);
2. asks ``cascades`` whether the closed run takes its children with it (it
   failed, was cancelled or continued as new); if so,
   every open child for which ``cancels_with_parent`` holds is closed at once
   as cancelled with ``cascade_reason`` (``cancel_now``), which in turn applies
   these rules to that child (its own children, recursively).

So a parent never misses a child's outcome and never leaves an open child
behind when it fails or is cancelled, whatever process crashes when.
"""

from __future__ import annotations

from typing import NamedTuple

from worlds.types import (
    ChildClosed,
    EventKind,
    RunCancelled,
    RunContinued,
    RunRecord,
    RunStatus,
)

__all__ = [
    "ON_PARENT_CLOSE",
    "ON_PARENT_CLOSE_KEY",
    "PARENT_KEY",
    "Notice",
    "accepts_notice",
    "cancels_with_parent",
    "cascade_reason",
    "cascades",
    "closed_notice",
]

PARENT_KEY = "$parent"
"""The attribute naming a child run's parent run id."""

ON_PARENT_CLOSE_KEY = "$on_parent_close"
"""The attribute holding a child's ``on_parent_close`` choice."""

ON_PARENT_CLOSE = ("cancel", "abandon")
"""The choices: cancel the open child when the parent fails or is cancelled, or leave it."""


class Notice(NamedTuple):
    """``event`` is to be appended to run ``parent_run_id`` (if it is still open)."""

    parent_run_id: str
    event: ChildClosed


def closed_notice(run: RunRecord, closing: EventKind) -> Notice | None:
    """What ``run``, just closed by ``closing``, tells its parent; None if it has none."""
    parent = run.attributes.get(PARENT_KEY)
    if not isinstance(parent, str) or not run.status.is_closed:
        return None
    reason = closing.reason if isinstance(closing, RunCancelled) else None
    next_run_id = closing.next_run_id if isinstance(closing, RunContinued) else None
    event = ChildClosed(
        run_id=run.id,
        status=run.status,
        result=run.result,
        error=run.error,
        reason=reason,
        next_run_id=next_run_id,
    )
    return Notice(parent, event)


def accepts_notice(parent: RunRecord) -> bool:
    """Whether ``parent`` is open, so a ``ChildClosed`` may be appended to it."""
    return not parent.status.is_closed


def cascades(run: RunRecord) -> bool:
    """Whether ``run``'s open children are cancelled now it closed: it failed, was
    cancelled, or continued as new (its successor cannot wait for them). A
    completed run's children keep running: it chose not to wait for them."""
    return run.status in (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.CONTINUED)


def cancels_with_parent(child: RunRecord, parent_run_id: str) -> bool:
    """Whether open ``child`` of ``parent_run_id`` is cancelled with its parent."""
    return (
        child.attributes.get(PARENT_KEY) == parent_run_id
        and not child.status.is_closed
        and child.attributes.get(ON_PARENT_CLOSE_KEY, "cancel") != "abandon"
    )


def cascade_reason(parent: RunRecord) -> str:
    """The reason recorded on a child cancelled because ``parent`` closed."""
    return f"parent run {parent.id} {parent.status.value}"
