"""Rules every world applies the same way, shared so each backend stays small.

A third-party world may use these helpers; they are pure functions over the
types in ``worlds.types`` and touch no storage.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterable
from datetime import datetime, timedelta

import msgspec

from worlds.types import (
    AttributeValue,
    EventKind,
    NewWorkItem,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunFailed,
    RunQuery,
    RunRecord,
    RunStarted,
    RunStatus,
    StartPolicy,
    StepCompleted,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    utcnow,
)

__all__ = [
    "CANCEL_DEADLINE_TIMER",
    "CLOSING_EVENTS",
    "RUN_DEADLINE_TIMER",
    "apply_to_run",
    "decode_cursor",
    "encode_cursor",
    "index_value",
    "lease_deadline",
    "matches",
    "may_take_over",
    "new_run_id",
    "settled",
    "step_item_id",
    "timer_item_id",
    "work_item_id",
    "workflow_item_id",
]


def index_value(value: AttributeValue) -> str:
    """The canonical text of an attribute value, used as its index and claim key.

    The type is part of the text, so ``1``, ``1.0``, ``True`` and ``"1"`` are
    four different values, and datetimes compare as UTC instants.
    """
    if value is None:
        return "n:"
    if isinstance(value, bool):
        return "b:1" if value else "b:0"
    if isinstance(value, int):
        return f"i:{value}"
    if isinstance(value, float):
        return f"f:{value!r}"
    if isinstance(value, str):
        return f"s:{value}"
    if isinstance(value, datetime):
        return f"t:{value.astimezone(utcnow().tzinfo).isoformat()}"
    raise TypeError(f"not an attribute value: {type(value).__name__}")


CLOSING_EVENTS = (RunCompleted, RunFailed, RunCancelled, RunContinued)
"""The events that close a run (``apply_to_run`` gives each its closed status)."""


def apply_to_run(run: RunRecord, event: EventKind) -> RunRecord:
    """The run record after ``event`` (with its ``seq`` and ``at``) is appended."""
    changes: dict[str, object] = {"last_seq": event.seq}
    if isinstance(event, RunStarted):
        changes.update(status=RunStatus.RUNNING, started_at=event.at)
    elif isinstance(event, RunCompleted):
        changes.update(status=RunStatus.COMPLETED, closed_at=event.at, result=event.result)
    elif isinstance(event, RunFailed):
        changes.update(status=RunStatus.FAILED, closed_at=event.at, error=event.error)
    elif isinstance(event, RunCancelled):
        changes.update(status=RunStatus.CANCELLED, closed_at=event.at)
    elif isinstance(event, RunContinued):
        changes.update(status=RunStatus.CONTINUED, closed_at=event.at)
    elif isinstance(event, RunCancelRequested):
        changes.update(status=RunStatus.CANCELLING)
    return msgspec.structs.replace(run, **changes)


def may_take_over(policy: StartPolicy, holder: RunStatus) -> bool:
    """Whether ``policy`` lets a new run take its key's claim from a ``holder`` run."""
    if not holder.is_closed:
        return policy.conflict == "terminate_existing"
    if policy.reuse == "allow_duplicate_failed_only":
        return holder in (RunStatus.FAILED, RunStatus.CANCELLED)
    return policy.reuse == "allow_duplicate"


def matches(run: RunRecord, query: RunQuery) -> bool:
    """Whether ``run`` passes every filter of ``query`` (cursor excluded)."""
    if query.workflow is not None and run.workflow != query.workflow:
        return False
    if query.statuses is not None and run.status not in query.statuses:
        return False
    if query.created_after is not None and run.created_at < query.created_after:
        return False
    if query.created_before is not None and run.created_at >= query.created_before:
        return False
    for key, value in query.attributes.items():
        if key not in run.attributes or index_value(run.attributes[key]) != index_value(value):
            return False
    return True


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class _MonotonicIds:
    """ULIDs that keep increasing within this process, even inside one millisecond."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            candidate = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
            if candidate >> 80 <= self._last >> 80:
                candidate = self._last + 1 + int.from_bytes(os.urandom(2), "big")
            self._last = candidate
            return candidate


_ids = _MonotonicIds()


def new_run_id() -> str:
    """A new run id: 26 characters that sort by creation time (a monotonic ULID)."""
    number = _ids.next()
    chars = []
    for _ in range(26):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


CANCEL_DEADLINE_TIMER = 0
"""Timer number of a cancelling run's grace deadline: when due, the run closes
as cancelled even if its cleanup has not finished."""

RUN_DEADLINE_TIMER = -1
"""Timer number of a run's timeout (``CreateRunRequest.timeout_at``): when due,
the run fails with ``TimeoutError``."""


def workflow_item_id(run_id: str) -> str:
    """The id of a run's (single) workflow work item."""
    return f"wf:{run_id}"


def step_item_id(run_id: str, step: int) -> str:
    """The id of the work item that runs step number ``step``."""
    return f"step:{run_id}:{step}"


def timer_item_id(run_id: str, wait: int) -> str:
    """The id of the work item that fires wait number ``wait``."""
    return f"timer:{run_id}:{wait}"


def work_item_id(run_id: str, new: NewWorkItem) -> str:
    """The id the item ``new`` gets in run ``run_id``'s queue."""
    if new.kind == "workflow":
        return workflow_item_id(run_id)
    if new.kind == "step":
        return step_item_id(run_id, new.number)
    return timer_item_id(run_id, new.number)


def lease_deadline(now: datetime, lease_seconds: float) -> datetime:
    """When a lease taken at ``now`` expires."""
    return now + timedelta(seconds=lease_seconds)


def encode_cursor(run_id: str) -> str:
    """An opaque pagination cursor positioned after ``run_id``."""
    return base64.urlsafe_b64encode(run_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The run id a cursor from ``encode_cursor`` points after; ``ValueError`` if bad."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        run_id = base64.urlsafe_b64decode(padded.encode()).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed cursor: {cursor!r}") from exc
    if not run_id or encode_cursor(run_id) != cursor:
        raise ValueError(f"malformed cursor: {cursor!r}")
    return run_id


def settled(events: Iterable[EventKind], step: int, attempt: int) -> bool:
    """Whether the log already holds an outcome (or a discard) of this step attempt.

    A late result refused for a lost lease is recorded as ``StepDiscarded``
    unless it is settled: then it is the retry of a commit that had landed.
    """
    return any(
        isinstance(event, (StepCompleted, StepFailed, StepRetrying, StepDiscarded))
        and event.step == step
        and event.attempt == attempt
        for event in events
    )
