"""Rules every world applies the same way, shared so each backend stays small.

A third-party world may use these helpers; they are pure functions over the
types in ``worlds.types`` and touch no storage. The rules themselves live in
the private ``worlds._rules`` package, one module per concept; this module
re-exports the ones a world outside this package needs: ids and cursors, index
values and query matching, the records a world writes (``new_run``,
``created_event``, ``apply_to_run``, ``stale_result``), the column codecs of a
claim's reuse window, and predicates a world's own queries may evaluate
(``is_free``, ``schedule_is_due``, and RFC 0025's ``build_may_lease`` and
``check_build_workflows``). The order in which an operation applies the
rules is not here: the built-in worlds share it in ``worlds._flows``.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from datetime import datetime, timedelta

from worlds._rules import slots
from worlds._rules.cancel import CANCEL_DEADLINE_TIMER
from worlds._rules.children import ON_PARENT_CLOSE, ON_PARENT_CLOSE_KEY, PARENT_KEY
from worlds._rules.claims import (
    decode_release_on,
    encode_release_on,
    is_free,
    may_take_over,
    on_close,
)
from worlds._rules.commits import settled, stale_result
from worlds._rules.counts import MAX_BUCKETS, bucket_of, check_window
from worlds._rules.deployments import check_workflows as check_build_workflows
from worlds._rules.deployments import may_lease as build_may_lease
from worlds._rules.failures import ON_FAILURE_OF_KEY, handler_run_id
from worlds._rules.rates import check_rate
from worlds._rules.reopen import effective_log, reopen_base
from worlds._rules.retention import CLOSED_STATUSES, PIN_KEY, is_pinned
from worlds._rules.runs import (
    CLOSING_EVENTS,
    RUN_DEADLINE_TIMER,
    apply_to_run,
    created_event,
    deadline_item,
    first_task_commit,
    new_run,
    runs_ahead,
    stamped,
)
from worlds._rules.schedules import is_due as schedule_is_due
from worlds._rules.slot_history import check_span as check_history_span
from worlds._rules.streams import check_name as check_stream_name
from worlds._rules.terms import (
    SELECTIVITY_CAP,
    index_terms,
    index_value,
    matches,
    most_selective_first,
)
from worlds._rules.transactions import check_isolation
from worlds.types import EventKind, HookReceived, HookRecord, NewWorkItem, RunContinued

__all__ = [
    "CANCEL_DEADLINE_TIMER",
    "CLOSED_STATUSES",
    "CLOSING_EVENTS",
    "MAX_BUCKETS",
    "ON_FAILURE_OF_KEY",
    "ON_PARENT_CLOSE",
    "ON_PARENT_CLOSE_KEY",
    "PARENT_KEY",
    "PIN_KEY",
    "RUN_DEADLINE_TIMER",
    "SELECTIVITY_CAP",
    "apply_to_run",
    "bucket_of",
    "build_may_lease",
    "carried_payloads",
    "check_build_workflows",
    "check_history_span",
    "check_isolation",
    "check_rate",
    "check_stream_name",
    "check_window",
    "created_event",
    "deadline_item",
    "decode_cursor",
    "decode_release_on",
    "effective_log",
    "encode_cursor",
    "encode_release_on",
    "first_task_commit",
    "handler_run_id",
    "index_terms",
    "index_value",
    "is_free",
    "is_pinned",
    "lease_deadline",
    "matches",
    "may_take_over",
    "most_selective_first",
    "new_run",
    "new_run_id",
    "on_close",
    "reopen_base",
    "runs_ahead",
    "schedule_is_due",
    "settled",
    "slots",
    "stale_result",
    "stamped",
    "step_item_id",
    "timer_item_id",
    "work_item_id",
    "workflow_item_id",
]


def carried_payloads(
    events: list[EventKind], hooks: list[HookRecord], continued: RunContinued
) -> list[HookReceived]:
    """What a run that continues as new hands its successor, in log order.

    ``events`` are the run's log, ``hooks`` the tokens it holds. For each token
    the first ``continued.hooks_read[token]`` payloads were taken by the body;
    the rest become ``HookReceived(hook=0, token=...)`` events of the next run,
    keeping their resume ids. A world appends them right after the next run's
    ``RunCreated`` and moves the tokens to it unbound (hook 0).
    """
    numbers = {hook.token: hook.hook for hook in hooks}
    skip = {token: continued.hooks_read.get(token, 0) for token in numbers}
    carried: list[HookReceived] = []
    for event in events:
        if not isinstance(event, HookReceived):
            continue
        if event.hook == 0:
            token = event.token
        else:
            token = next((t for t, n in numbers.items() if n == event.hook), "")
        if token not in skip:
            continue
        if skip[token] > 0:
            skip[token] -= 1
            continue
        carried.append(
            HookReceived(hook=0, token=token, payload=event.payload, resume_id=event.resume_id)
        )
    return carried


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_CROCKFORD_PAIRS = [high + low for high in _CROCKFORD for low in _CROCKFORD]
"""Two Crockford digits per 10 bits: a run id is 13 look-ups, not 26 divisions."""
_PAIR_SHIFTS = range(120, -1, -10)


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
    return "".join([_CROCKFORD_PAIRS[number >> shift & 1023] for shift in _PAIR_SHIFTS])


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
