"""Updates: accepted once per id and run, answered once, refused by a closed run.

``World.send_update(run_id, delivery)`` and ``World.update_with_start`` decide here:

1. an ``update_id`` the run has accepted before writes nothing: the caller gets
   that update's outcome (``accept`` answers ``"answer"``), also after the run
   closed;
2. a run that is closed (or unknown) refuses a new update: its outcome is
   ``failed``, naming why (``refused``);
3. otherwise the run's log gets ``UpdateReceived`` (``received``) and its
   workflow is woken.

The outcome is read from the log (``outcome``): the first ``UpdateReplied`` or
``UpdateRejected`` for the id after its ``UpdateReceived`` is the answer every
caller gets, however many replies a later log holds; with none and the run
closed, the update failed. So a reply is recorded once and survives whatever
happens to the worker or the caller after its commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from worlds.types import (
    CreateRunRequest,
    EventKind,
    RunRecord,
    RunStatus,
    UpdateDelivery,
    UpdateOutcome,
    UpdateReceived,
    UpdateRejected,
    UpdateReplied,
)

__all__ = [
    "accept",
    "answers",
    "check_delivery",
    "check_request",
    "outcome",
    "pending",
    "received",
    "refused",
]

_MAX_NAME = 256
"""Longest update name or id, in characters (both are stored as text and indexed)."""


def check_delivery(delivery: UpdateDelivery) -> None:
    """Raise ``ValueError`` for an update name or id that is empty, too long or not
    text a world can store (a lone surrogate)."""
    for what, text in (("update name", delivery.name), ("update id", delivery.update_id)):
        if not isinstance(text, str) or not 1 <= len(text) <= _MAX_NAME:
            raise ValueError(f"the {what} must be 1-{_MAX_NAME} characters, got {text!r}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"the {what} {text!r} is not valid text") from None
        if "\x00" in text:
            raise ValueError(f"the {what} {text!r} holds a NUL character")


def check_request(request: CreateRunRequest) -> str:
    """The key of the pair ``update_with_start`` is keyed by; ``ValueError`` without one."""
    if request.policy is None:
        raise ValueError("update_with_start needs request.policy naming the unique key")
    if request.debounce is not None:
        raise ValueError("update_with_start takes no debounce")
    return request.policy.key


def answers(events: Sequence[EventKind]) -> bool:
    """Whether ``events`` (a commit) answer an update: its callers are woken."""
    return any(isinstance(event, (UpdateReplied, UpdateRejected)) for event in events)


def pending(run_id: str) -> UpdateOutcome:
    """The outcome of an update delivered and not answered yet."""
    return UpdateOutcome(run_id=run_id, state="pending")


def accept(status: RunStatus | None, seen: bool) -> Literal["answer", "deliver", "refuse"]:
    """What an update does to a run of ``status`` (``None``: no such run): answer
    an id ``seen`` before, refuse a closed or unknown run, else deliver."""
    if seen:
        return "answer"
    if status is None or status.is_closed:
        return "refuse"
    return "deliver"


def received(delivery: UpdateDelivery) -> UpdateReceived:
    """The event a delivered update appends to its run's log."""
    return UpdateReceived(
        name=delivery.name, update_id=delivery.update_id, payload=delivery.payload
    )


def refused(run_id: str, run: RunRecord | None) -> UpdateOutcome:
    """The outcome of an update to a closed (or unknown) run: failed, saying why."""
    if run is None:
        return UpdateOutcome(run_id=run_id, state="failed", message=f"no run {run_id}")
    return UpdateOutcome(
        run_id=run_id,
        state="failed",
        message=f"run {run_id} is {run.status.value}: it takes no updates",
    )


def outcome(run: RunRecord, update_id: str, events: Sequence[EventKind]) -> UpdateOutcome:
    """The outcome of accepted update ``update_id`` of ``run``, from the log's
    ``events`` from its ``UpdateReceived`` on: the first answer, else ``failed``
    when the run closed without one, else ``pending``."""
    for event in events:
        if isinstance(event, UpdateReplied) and event.update_id == update_id:
            return UpdateOutcome(run_id=run.id, state="replied", result=event.result)
        if isinstance(event, UpdateRejected) and event.update_id == update_id:
            return UpdateOutcome(run_id=run.id, state="rejected", message=event.message)
    if run.status.is_closed:
        return UpdateOutcome(
            run_id=run.id,
            state="failed",
            message=f"run {run.id} {_closed_how(run.status)} before replying to update "
            f"{update_id!r}",
        )
    return pending(run.id)


def _closed_how(status: RunStatus) -> str:
    """``status`` as a verb phrase: "completed", "was cancelled", "continued as new"."""
    match status:
        case RunStatus.CANCELLED:
            return "was cancelled"
        case RunStatus.FAILED:
            return "failed"
        case RunStatus.COMPLETED:
            return "completed"
        case RunStatus.CONTINUED:
            return "continued as new"
        case _:
            return f"closed ({status.value})"
