"""Unique claims: who may hold a (key, value) pair, and at which generation.

A claim's generation counts its holders: the first holder has 1, and each
new holder (a takeover, a run continuing as new, a claim taken again after
it was released) gets one more. A released pair keeps its last generation,
so generations of a pair only ever grow.

Reuse windows (``ReuseWindow``): when a holder closes, ``on_close`` says
whether each of its claims is released at once (its status is in
``release_on``), lapses later (``ttl``) or stays. Pruning a run keeps its
claims as tombstones (the holder's id and final status) unless asked to
release them; ``is_free`` says whether a stored claim still refuses others.
``on_release`` decides ``World.release_claim``: the way out of a tombstone
(or of a closed holder's claim) that an operator asks for.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    ClaimConflict,
    Debounce,
    ReuseWindow,
    RunStatus,
    StartPolicy,
)

__all__ = [
    "Debounced",
    "HeldClaim",
    "Takeover",
    "check_window",
    "claims_again",
    "debounce",
    "decode_release_on",
    "encode_release_on",
    "first_start",
    "is_free",
    "may_take_over",
    "next_generation",
    "on_attribute_set",
    "on_close",
    "on_create",
    "on_release",
    "window_on_set",
]


class HeldClaim(NamedTuple):
    """What a world stores for a pair: its holder (``None`` once released) and generation.

    ``lapses_at`` is set once the holder closed under a ``ttl``;
    ``pruned_status`` on a tombstone (the holder was pruned).
    """

    run_id: str | None
    generation: int
    step: int | None = None
    lapses_at: datetime | None = None
    pruned_status: RunStatus | None = None
    window: ReuseWindow = ReuseWindow()
    """The reuse window its holder took it with."""


def is_free(held: HeldClaim | None, now: datetime) -> bool:
    """Whether a new holder may claim the pair: never claimed, released, or lapsed."""
    if held is None or held.run_id is None:
        return True
    return held.lapses_at is not None and held.lapses_at <= now


def on_close(
    status: RunStatus, closed_at: datetime, ttl: float | None, release_on: Iterable[RunStatus]
) -> Literal["release"] | datetime | None:
    """A claim's fate when its holder closes with ``status`` at ``closed_at``.

    ``"release"`` (free now, keeping its generation), the time it lapses, or
    ``None`` (it stays). A run that continues as new keeps its claims (they
    move to the next run), so this is not asked then.
    """
    if status in frozenset(release_on):
        return "release"
    if ttl is not None:
        return closed_at + timedelta(seconds=ttl)
    return None


_RELEASABLE = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})


def check_window(key: str, window: ReuseWindow) -> None:
    """Raise ``ValueError`` for a window no world can honour."""
    if window.ttl is not None and not 0 <= window.ttl <= 100 * 365 * 86400:
        raise ValueError(f"ttl of {key!r} must be 0 to 100 years in seconds, got {window.ttl}")
    wrong = sorted(set(window.release_on) - _RELEASABLE)
    if wrong:
        raise ValueError(
            f"release_on of {key!r} names {wrong}; a claim is released when its holder "
            f"closes as one of {sorted(_RELEASABLE)}"
        )


def encode_release_on(release_on: Iterable[RunStatus]) -> str | None:
    """The text column a world stores ``release_on`` in (``None`` when empty)."""
    statuses = sorted(str(status) for status in release_on)
    return ",".join(statuses) if statuses else None


def decode_release_on(text: str | None) -> frozenset[RunStatus]:
    """``encode_release_on`` undone."""
    return frozenset(RunStatus(part) for part in text.split(",")) if text else frozenset()


def next_generation(held: HeldClaim | None) -> int:
    """The generation a new holder of a pair gets (1 for a pair never claimed)."""
    return 1 if held is None else held.generation + 1


def may_take_over(policy: StartPolicy, holder: RunStatus) -> bool:
    """Whether ``policy`` lets a new run take its key's claim from a ``holder`` run."""
    if not holder.is_closed:
        return policy.conflict == "terminate_existing"
    if policy.reuse == "allow_duplicate_failed_only":
        return holder in (RunStatus.FAILED, RunStatus.CANCELLED)
    return policy.reuse == "allow_duplicate"


class Takeover(NamedTuple):
    """A new run takes a pair over: at ``generation``, cancelling the holder if still open."""

    generation: int
    cancel_reason: str | None
    """The reason of the holder's ``RunCancelled`` (``None``: the holder is closed or gone)."""


def on_create(
    policy: StartPolicy | None,
    key: str,
    value: AttributeValue,
    held: tuple[str, int],
    holder_status: RunStatus | None,
    run_id: str,
    pruned: bool = False,
) -> Takeover | ClaimConflict:
    """New run ``run_id`` meets a pair ``held`` (holder run, generation): take over or conflict.

    Only the policy's key may be taken over, and only as ``may_take_over``
    allows for the holder's status (``None``: the holder run is gone; a
    tombstone, ``pruned``, gives its holder's final status). The new holder's
    generation is ``next_generation`` of the held claim; a holder that is not
    closed is cancelled ("superseded"). Call it only for a pair that is not
    ``is_free``.
    """
    allowed = policy is not None and policy.key == key
    if policy is not None and allowed and holder_status is not None:
        allowed = may_take_over(policy, holder_status)
    if not allowed:
        return ClaimConflict(
            key=key,
            value=value,
            holder_run_id=held[0],
            holder_status=holder_status,
            holder_pruned=pruned,
        )
    still_open = holder_status is not None and not holder_status.is_closed
    reason = f"superseded by run {run_id}" if still_open else None
    return Takeover(next_generation(HeldClaim(*held)), reason)


def on_attribute_set(
    held: HeldClaim | None, run_id: str, event: AttributeSet, now: datetime
) -> int | AttributeConflict:
    """A unique ``AttributeSet`` of ``run_id`` meets ``held``: its generation or a conflict.

    A free pair (``is_free``) is claimed at ``next_generation``; the same run
    and step claiming again keeps the generation (``claims_again``; and its
    reuse window, ``window_on_set``); any other holder, a tombstone included,
    conflicts.
    """
    if is_free(held, now):
        return next_generation(held)
    assert held is not None and held.run_id is not None
    if held.run_id == run_id and held.step == event.step:
        return held.generation
    return AttributeConflict(
        key=event.key,
        value=event.value,
        holder_run_id=held.run_id,
        step=event.step,
        attempt=event.attempt,
    )


def claims_again(held: HeldClaim | None, run_id: str, event: AttributeSet, now: datetime) -> bool:
    """Whether ``event`` is the pair's holder (run and step) setting it again."""
    if held is None or is_free(held, now):
        return False
    return held.run_id == run_id and held.step == event.step


def window_on_set(
    held: HeldClaim | None, run_id: str, event: AttributeSet, now: datetime
) -> ReuseWindow:
    """The reuse window a unique ``AttributeSet`` stores with its claim: its own, but
    the holder setting its pair again (``claims_again``) keeps the window it holds
    it with, so that window still applies when the holder closes."""
    if held is not None and claims_again(held, run_id, event, now):
        return held.window
    return ReuseWindow(ttl=event.ttl, release_on=event.release_on)


def on_release(
    held: HeldClaim | None, holder_status: RunStatus | None, now: datetime
) -> Literal["free", "release", "open"]:
    """What ``World.release_claim`` does with a pair ``held`` so.

    ``"free"``: nothing holds it (never claimed, released or lapsed), so there
    is nothing to release. ``"release"``: its holder was pruned (a tombstone),
    is gone, or has closed (``holder_status``): the pair is freed, keeping its
    generation, so its next holder gets a higher one. ``"open"``: its holder
    is still pending or running and keeps it, since taking a live run's claim
    away would let a second run hold the pair; the run must close first.
    """
    if is_free(held, now):
        return "free"
    assert held is not None
    if held.pruned_status is not None or holder_status is None or holder_status.is_closed:
        return "release"
    return "open"


class Debounced(NamedTuple):
    """A debounce updates the pending holder: new arguments, start at ``start_at``."""

    start_at: datetime


def debounce(
    request: Debounce,
    now: datetime,
    holder_status: RunStatus | None,
    holder_created_at: datetime | None,
    untouched: bool,
    held: HeldClaim,
) -> Debounced | Takeover:
    """A debounced start meets its pair held by a run (``is_free`` was False).

    ``untouched``: the holder's log is only ``RunCreated`` and no worker ever
    leased its workflow item. Such a pending holder is debounced: its start
    moves to ``now + delay``, never past ``created_at + max_delay``. Any
    other holder (running, closed, pruned, or already handed to a worker)
    keeps running, and the new run takes the pair over, one generation up.
    """
    if holder_status is RunStatus.PENDING and untouched and holder_created_at is not None:
        latest = holder_created_at + timedelta(seconds=request.max_delay)
        return Debounced(min(now + timedelta(seconds=request.delay), latest))
    return Takeover(next_generation(held), None)


def first_start(request: Debounce, now: datetime) -> datetime:
    """When a run created by a debounced start starts: ``min(delay, max_delay)`` from now."""
    return now + timedelta(seconds=min(request.delay, request.max_delay))
