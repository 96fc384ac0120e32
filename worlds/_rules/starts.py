"""Moving a pending run's start: ``Run.start_now()`` and ``Run.set_delay()``.

A run may be moved while it has not started: it is ``pending``, its log is
only ``RunCreated`` and its workflow item was never handed to a worker (the
test debounce uses too, ``claims.debounce``). Its item then becomes due at the
new time. Flow control still applies: a run waiting for a slot of a limited
pair has no item and starts when promoted (``start_now`` leaves it in line,
``set_delay`` is refused: its start is its promotion), and a rate-limited run
starts no earlier than a token of each of its pairs allows (``new_start``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worlds._rules.rates import Window, next_token
from worlds.types import RunRecord, RunStatus

__all__ = ["new_start", "refusal", "waits_to_start"]


def waits_to_start(
    run: RunRecord, due_at: datetime | None, leased: bool, in_line: bool, now: datetime
) -> bool:
    """Whether ``run`` waits for its start, so a wake-up (a hook payload, say) must
    not start it early: it is pending, never began, and waits in line for a
    start-time slot (``in_line``: its promotion gives it its work), or its workflow
    item, in no worker's hands (``leased``), is due later (``due_at``: a delay or a
    rate token). What woke it waits in its log, and its start reads it."""
    if run.status is not RunStatus.PENDING or run.started_at is not None:
        return False
    if in_line:
        return True
    return due_at is not None and not leased and due_at > now


def refusal(run: RunRecord, has_item: bool, ever_leased: bool, *, delaying: bool) -> str | None:
    """Why ``run`` cannot be moved (``None``: it can). ``has_item`` says it has a
    workflow item (else it waits for a slot); ``delaying``: ``set_delay``, not
    ``start_now``."""
    started = run.status is not RunStatus.PENDING or run.last_seq > 1 or ever_leased
    if started or run.started_at is not None:
        return (
            f"run {run.id} has already started (it is {run.status.value}): only a pending "
            "run that no worker has begun can start now or be delayed"
        )
    if not has_item and delaying:
        return (
            f"run {run.id} waits for a slot of a limited pair: it starts when it is promoted, "
            "so its start cannot be delayed"
        )
    return None


def new_start(
    own: datetime | None,
    others: Sequence[tuple[str, Window, int, float]],
    desired: datetime,
    now: datetime,
) -> datetime:
    """When a run asked to start at ``desired`` starts.

    Without rate-limited pairs (``others`` empty) that is ``desired``. Else
    ``own`` is the time of the run's tokens and ``others`` gives, for each of
    its pairs, the other tokens there (newest first) and the pair's rate: the
    run takes new tokens, all at the latest of ``desired`` and each pair's next
    token without the run's own (so each pair's window keeps its limit), unless
    that is later than ``own`` while ``desired`` is not: it keeps its place then.
    """
    if not others:
        return desired
    nexts = [
        next_token(key, None, tokens, limit, per, now, desired)[0]
        for key, tokens, limit, per in others
    ]
    candidate = max([desired, *nexts])
    if own is not None and desired <= own <= candidate:
        return own  # no earlier place is free: it keeps its place
    return candidate
