"""Every error the runtime raises, under one root.

::

    WorkflowError
    ├── FatalError               raised in a step: fail it now, no retries
    ├── RetryableError           raised in a step: retry it (after retry_after, if given)
    ├── StepFailedError          a workflow awaited a step that failed for good
    ├── AttributeConflictError   a unique attribute pair is held by another run
    │   └── RateLimitExceededError   a RateLimited(..., on_full="fail") pair's window is full
    ├── HookConflictError        a hook token is held by another run
    ├── HookNotFoundError        resume_hook() of a token no open run holds
    ├── RunAlreadyStartedError   a start policy refused to start a duplicate run
    ├── NonDeterminismError      replay diverged from the recorded event log
    ├── RunFailedError           Run.result() of a run that failed
    ├── RunCancelledError        Run.result() of a run that was cancelled
    ├── RunNotFoundError         no run with that id exists in the world
    ├── QuerySyntaxError         a run filter (``list_runs(query=...)``) is malformed
    ├── ScheduleExistsError      create_schedule() with an id already taken
    ├── ScheduleNotFoundError    a schedule handle names a schedule the world does not have
    ├── NotInWorkflowError       a workflow-only call made outside a workflow (or step)
    ├── StreamClosedError        write_stream() to a stream close_stream() closed
    └── UndecodableValueError    a value does not validate as its annotation

    BaseException
    └── ContinueAsNew            control flow of continue_as_new(); never catch it

Control-flow signals derive from ``BaseException`` so that ``except Exception``
in user code cannot swallow them. This module imports nothing from the project.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

__all__ = [
    "AttributeConflictError",
    "ContinueAsNew",
    "FatalError",
    "HookConflictError",
    "HookNotFoundError",
    "NonDeterminismError",
    "NotInWorkflowError",
    "QuerySyntaxError",
    "RateLimitExceededError",
    "RetryableError",
    "RunAlreadyStartedError",
    "RunCancelledError",
    "RunFailedError",
    "RunNotFoundError",
    "ScheduleExistsError",
    "ScheduleNotFoundError",
    "StepFailedError",
    "StreamClosedError",
    "UndecodableValueError",
    "UpdateFailedError",
    "UpdateRejectedError",
    "WorkerFencedError",
    "WorkflowError",
]


class _RunHandle(Protocol):
    @property
    def id(self) -> str: ...


class WorkflowError(Exception):
    """Root of every error this runtime raises."""


class FatalError(WorkflowError):
    """Raise inside a step to fail it at once, without retrying.

    For a failure worth retrying, raise ``RetryableError`` (or any other exception).
    """


class RetryableError(WorkflowError):
    """Raise inside a step to ask for a retry, optionally after ``retry_after``.

    Any other exception is retried too, on the step's backoff schedule; this one
    lets the step choose the delay. Raise ``FatalError`` to stop retrying.
    """

    def __init__(self, message: str, *, retry_after: float | timedelta | None = None) -> None:
        super().__init__(message)
        if isinstance(retry_after, timedelta):
            retry_after = retry_after.total_seconds()
        self.retry_after: float | None = retry_after


class StepFailedError(WorkflowError):
    """Raised in a workflow by awaiting a step that failed for good.

    ``error_type`` and ``error_message`` are what the step's last attempt raised.
    """

    def __init__(self, step_name: str, error_type: str, error_message: str) -> None:
        super().__init__(f"step {step_name!r} failed: {error_type}: {error_message}")
        self.step_name = step_name
        self.error_type = error_type
        self.error_message = error_message


class AttributeConflictError(WorkflowError):
    """A unique attribute (``key``, ``value``) is already held by another run.

    Raised by ``start(..., attributes={k: Unique(v)})`` (nothing is created) and by
    ``set_attribute(k, v, unique=True)``. ``existing_run`` is a handle to the holder.
    Also raised by ``start(..., attributes={k: Limited(v, n, on_full="fail")})``
    when all ``n`` slots of the pair are held (``limit`` is then ``n`` and
    ``existing_run`` one of the holders); use ``on_full="queue"`` to wait instead.
    ``holder_pruned`` is True when the holder was pruned and its claim is a
    tombstone: ``release_claims(key, value)`` frees it, as does the next
    ``prune_runs(..., release_claims=True)``. ``release_claims`` raises it too
    for a pair an open run holds (``reason`` then says why nothing was released).
    """

    def __init__(
        self,
        key: str,
        value: Any,
        existing_run: _RunHandle,
        *,
        limit: int | None = None,
        pruned: bool = False,
        reason: str | None = None,
    ) -> None:
        if pruned:
            message = (
                f"attribute {key}={value!r} is held by run {existing_run.id}, which was pruned: "
                f"its claim is kept as a tombstone; release_claims({key!r}, {value!r}) "
                "(or `wf attributes release`) frees it, and so does the next "
                "prune_runs(..., release_claims=True)"
            )
        elif limit is None:
            message = f"attribute {key}={value!r} is held by run {existing_run.id}"
            if reason is not None:
                message += f"; {reason}"
        else:
            message = (
                f"attribute {key}={value!r} is full: all {limit} slots are held "
                f"(one by run {existing_run.id}); Limited(..., on_full='queue') waits instead"
            )
        super().__init__(message)
        self.key = key
        self.value = value
        self.existing_run = existing_run
        self.limit = limit
        self.holder_pruned = pruned

    @property
    def existing_run_id(self) -> str:
        """The id of the run holding the pair."""
        return self.existing_run.id


class RateLimitExceededError(AttributeConflictError):
    """A ``RateLimited(value, limit, per, on_full="fail")`` pair's window is full.

    Raised by ``start``; nothing was created. ``retry_after`` (seconds, a float)
    says when a start of the pair would be admitted if no other run starts with
    it first; ``existing_run`` is the run whose start leaves the window then,
    ``limit`` and ``per`` (seconds) the pair's rate. Use ``on_full="queue"`` to
    wait instead.
    """

    def __init__(
        self,
        key: str,
        value: Any,
        existing_run: _RunHandle,
        *,
        limit: int,
        per: float,
        retry_after: float,
    ) -> None:
        super().__init__(key, value, existing_run, limit=limit)
        self.args = (
            f"attribute {key}={value!r} is rate limited to {limit} starts per {per:g} s and "
            f"its window is full (run {existing_run.id} started in it); a start would be "
            f"admitted in {retry_after:.3f} s, or RateLimited(..., on_full='queue') waits",
        )
        self.per = per
        self.retry_after = retry_after


class HookConflictError(WorkflowError):
    """A hook token is already held by another run (``existing_run``)."""

    def __init__(self, token: str, existing_run: _RunHandle) -> None:
        super().__init__(f"hook token {token!r} is held by run {existing_run.id}")
        self.token = token
        self.existing_run = existing_run


class HookNotFoundError(WorkflowError, LookupError):
    """``resume_hook`` named a token no open run holds: unknown, or its run closed."""

    def __init__(self, token: str) -> None:
        super().__init__(f"no live hook with token {token!r} (unknown, or its run closed)")
        self.token = token


class UpdateRejectedError(WorkflowError):
    """``Run.update`` of an update the workflow refused with ``update.reject(message)``.

    Every caller of the same update id gets the same ``message``, also after the
    run closed.
    """

    def __init__(self, run_id: str, name: str, update_id: str, message: str) -> None:
        super().__init__(f"update {name!r} ({update_id}) of run {run_id} was rejected: {message}")
        self.run_id = run_id
        self.name = name
        self.update_id = update_id
        self.message = message


class UpdateFailedError(WorkflowError):
    """``Run.update`` of an update that got no answer: the run was closed (or unknown)
    when it came, or closed before replying; ``reason`` says which."""

    def __init__(self, run_id: str, name: str, update_id: str, reason: str) -> None:
        super().__init__(f"update {name!r} ({update_id}) of run {run_id} failed: {reason}")
        self.run_id = run_id
        self.name = name
        self.update_id = update_id
        self.reason = reason


class RunAlreadyStartedError(WorkflowError):
    """A start policy refused the start; ``existing_run`` is the run that blocks it.

    Raised only with ``error_when_already_started=True``; without it the policy
    returns the existing run instead.
    """

    def __init__(self, key: str, value: Any, existing_run: _RunHandle) -> None:
        super().__init__(f"a run for {key}={value!r} already exists: {existing_run.id}")
        self.key = key
        self.value = value
        self.existing_run = existing_run


class NonDeterminismError(WorkflowError):
    """Replaying a workflow issued a different call than its log recorded.

    ``position`` counts the workflow's recorded calls from 0. The run fails with
    this error; fix the code (or keep old code paths) to let new runs proceed.
    """

    def __init__(self, position: int, recorded: str, issued: str) -> None:
        super().__init__(
            f"non-deterministic workflow at call #{position}: the log recorded "
            f"{recorded}, but replay issued {issued}"
        )
        self.position = position
        self.recorded = recorded
        self.issued = issued


class RunFailedError(WorkflowError):
    """``Run.result()`` of a run that failed; ``error_type``/``error_message`` say why."""

    def __init__(self, run_id: str, error_type: str, error_message: str) -> None:
        super().__init__(f"run {run_id} failed: {error_type}: {error_message}")
        self.run_id = run_id
        self.error_type = error_type
        self.error_message = error_message


class RunCancelledError(WorkflowError):
    """``Run.result()`` of a run that was cancelled, with the recorded ``reason``."""

    def __init__(self, run_id: str, reason: str | None = None) -> None:
        suffix = f": {reason}" if reason else ""
        super().__init__(f"run {run_id} was cancelled{suffix}")
        self.run_id = run_id
        self.reason = reason


class RunNotFoundError(WorkflowError, LookupError):
    """No run with ``run_id`` exists in the world (it may have been pruned).

    ``pruned_status`` is set when the run is known to have been pruned (a handle
    ``find_run`` gave for a tombstone): how it had closed (a ``RunStatus``);
    ``claim`` is then the (key, value) pair its tombstone still refuses.
    """

    def __init__(
        self,
        run_id: str,
        *,
        pruned_status: str | None = None,
        claim: tuple[str, Any] | None = None,
    ) -> None:
        if pruned_status is None:
            message = f"no run {run_id!r} in this world"
        else:
            message = f"run {run_id!r} was pruned (it had closed as {pruned_status})"
            if claim is not None:
                key, value = claim
                message += (
                    f"; only its claim on {key}={value!r} is left, as a tombstone: "
                    f"release_claims({key!r}, {value!r}) or `wf attributes release` frees it"
                )
        super().__init__(message)
        self.run_id = run_id
        self.pruned_status = pruned_status
        self.claim = claim


class ScheduleExistsError(WorkflowError, ValueError):
    """``create_schedule`` was given an id another schedule of the world has.

    Nothing was written. Choose another id, or ``get_schedule(id)`` to use
    the existing schedule (``delete()`` it first to replace it).
    """

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"schedule {schedule_id!r} already exists; choose another id, or use "
            "get_schedule() to reach it (delete() it first to replace it)"
        )
        self.schedule_id = schedule_id


class ScheduleNotFoundError(WorkflowError, LookupError):
    """A schedule handle's operation found no schedule with its id (never created, or deleted).

    ``list_schedules()`` gives the schedules that exist; ``create_schedule``
    makes one.
    """

    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"no schedule {schedule_id!r} in this world")
        self.schedule_id = schedule_id


class QuerySyntaxError(WorkflowError, ValueError):
    """A run filter could not be parsed or is ill-typed.

    ``query`` is the text and ``position`` the 0-based index of the offending
    character in it; ``str(error)`` shows the query with a caret under it.
    """

    def __init__(self, message: str, query: str, position: int) -> None:
        self.message = message
        self.query = query
        self.position = max(0, min(position, len(query)))
        super().__init__(self.caret())

    WINDOW = 40
    """Characters of the query shown on each side of ``position`` in ``str(error)``."""

    def caret(self) -> str:
        """The message, the query around ``position`` (one line, at most about
        80 characters, ``…`` where cut), and a caret under the offending character.
        """
        start = self.query.rfind("\n", 0, self.position) + 1
        end = self.query.find("\n", self.position)
        end = len(self.query) if end < 0 else end
        low = max(start, self.position - self.WINDOW)
        high = min(end, self.position + self.WINDOW)
        before = "…" if low > start else ""
        line = before + self.query[low:high] + ("…" if high < end else "")
        column = len(before) + self.position - low
        pad = "".join("\t" if ch == "\t" else " " for ch in line[:column])
        return f"{self.message} (at position {self.position})\n  {line}\n  {pad}^"


class NotInWorkflowError(WorkflowError, RuntimeError):
    """A call that needs a workflow (or step) context was made outside one."""


class StreamClosedError(WorkflowError, RuntimeError):
    """``write_stream`` to a stream of this run that ``close_stream`` closed: a closed
    stream takes no more chunks (its readers have stopped)."""

    def __init__(self, run_id: str, name: str) -> None:
        super().__init__(f"stream {name!r} of run {run_id} is closed: it takes no more chunks")
        self.run_id = run_id
        self.name = name


class WorkerFencedError(WorkflowError, RuntimeError):
    """``Worker.run`` stopped because the world declared the worker dead: it did not
    heartbeat for its liveness window while other workers did (a long pause, a
    partition). Its work was taken over and its leases revoked; start it again to
    take work under a new registration."""


class UndecodableValueError(WorkflowError, TypeError, ValueError):
    """A value does not validate as the annotation of its parameter or result.

    Raised by ``start`` (and every start path) for an argument that does not
    validate, before anything is written; and when a recorded value no longer
    validates as the code's annotation says (the annotation changed since it
    was recorded), which fails the run or the step that decodes it. It is both
    a ``TypeError`` and a ``ValueError``, so either ``except`` catches it.
    """


class ContinueAsNew(BaseException):
    """Raised by ``continue_as_new``; the runtime turns it into a new run."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        super().__init__("continue as new")
        self.args_for_next_run = args
