"""Unique claims: who may hold a (key, value) pair, and at which generation.

A claim's generation counts its holders: the first holder has 1, and each
new holder (a takeover, a run continuing as new, a claim taken again after
its run was pruned) gets one more. A pruned run leaves a tombstone with the
last generation, so generations of a pair only ever grow.
"""

from __future__ import annotations

from typing import NamedTuple

from worlds.types import (
    AttributeConflict,
    AttributeSet,
    AttributeValue,
    ClaimConflict,
    RunStatus,
    StartPolicy,
)

__all__ = [
    "HeldClaim",
    "Takeover",
    "may_take_over",
    "next_generation",
    "on_attribute_set",
    "on_create",
]


class HeldClaim(NamedTuple):
    """What a world stores for a pair: its holder (``None`` once released) and generation."""

    run_id: str | None
    generation: int
    step: int | None = None


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
) -> Takeover | ClaimConflict:
    """New run ``run_id`` meets a pair ``held`` (holder run, generation): take over or conflict.

    Only the policy's key may be taken over, and only as ``may_take_over``
    allows for the holder's status (``None``: the holder run is gone). The new
    holder's generation is ``next_generation`` of the held claim; a holder
    that is not closed is cancelled ("superseded").
    """
    allowed = policy is not None and policy.key == key
    if policy is not None and allowed and holder_status is not None:
        allowed = may_take_over(policy, holder_status)
    if not allowed:
        return ClaimConflict(
            key=key, value=value, holder_run_id=held[0], holder_status=holder_status
        )
    still_open = holder_status is not None and not holder_status.is_closed
    reason = f"superseded by run {run_id}" if still_open else None
    return Takeover(next_generation(HeldClaim(*held)), reason)


def on_attribute_set(
    held: HeldClaim | None, run_id: str, event: AttributeSet
) -> int | AttributeConflict:
    """A unique ``AttributeSet`` of ``run_id`` meets ``held``: its generation or a conflict.

    A free or released pair is claimed at ``next_generation``; the same run
    and step claiming again keeps the generation; any other holder conflicts.
    """
    if held is None or held.run_id is None:
        return next_generation(held)
    if held.run_id == run_id and held.step == event.step:
        return held.generation
    return AttributeConflict(
        key=event.key,
        value=event.value,
        holder_run_id=held.run_id,
        step=event.step,
        attempt=event.attempt,
    )
