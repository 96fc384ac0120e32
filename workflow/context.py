"""The context API: what workflow and step code calls. Each function is one call
to the runtime in force (``workflow._runtime``).

Inside a workflow these calls are recorded in the run's event log and answered
from it on replay; inside a step they act on the current step attempt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, NoReturn
from uuid import UUID

from workflow import _runtime
from workflow._attributes import check_pair, check_priority, reuse_window
from workflow._codec import encode_result
from workflow._hooks import Hook
from workflow._updates import Update, check_update_name
from workflow.types import RunMetadata, StepMetadata
from worlds.quoting import quoted
from worlds.semantics import check_rate
from worlds.semantics import check_stream_name as check_name
from worlds.types import AttributeValue

__all__ = [
    "close_stream",
    "continue_as_new",
    "create_hook",
    "get_attribute",
    "get_run_metadata",
    "get_step_metadata",
    "hold",
    "list_attributes",
    "now",
    "patched",
    "random",
    "rate_limit",
    "receive_updates",
    "set_attribute",
    "sleep",
    "sleep_until",
    "uuid4",
    "write_stream",
]


async def set_attribute(
    key: str,
    value: AttributeValue | Callable[[AttributeValue], AttributeValue],
    unique: bool = False,
    *,
    ttl: float | timedelta | None = None,
    release_on: Collection[str] | None = None,
) -> AttributeValue:
    """Set an attribute on the current run (in a workflow) or step attempt (in a step).

    ``value`` may be a function ``current -> new``. With ``unique=True`` the pair
    is claimed across the whole world, or ``AttributeConflictError`` names the run
    holding it; ``ttl`` and ``release_on`` give the claim a reuse window, as
    ``Unique(value, ttl=..., release_on=...)`` does at start. In a workflow, the
    outcome is recorded, so replay gives the same answer. Attributes are visible
    metadata: never put secrets or personal data in them. Returns the value set.

    Raises:
        ValueError: ``ttl`` or ``release_on`` without ``unique=True``, or out of range.
    """
    window = reuse_window(ttl, release_on)
    if window is not None and not unique:
        raise ValueError("ttl and release_on are for unique claims: pass unique=True")
    return await _runtime.current().set_attribute(key, value, unique, window)


async def get_attribute(key: str) -> AttributeValue:
    """The current value of attribute ``key`` in scope, or ``None``."""
    return await _runtime.current().get_attribute(key)


async def list_attributes() -> dict[str, AttributeValue]:
    """All attributes in scope, as a dict."""
    return await _runtime.current().list_attributes()


async def sleep(duration: float | timedelta) -> None:
    """A durable timer: the run holds no worker while it waits, and survives restarts.

    A duration too long to be a date (``sleep(1e12)``, ``math.inf``) waits until
    the year 9000, that is forever; zero or less returns at the next event.

    Raises:
        TypeError: ``duration`` is not a number of seconds or a ``timedelta``.
        ValueError: ``duration`` is NaN.
        NotInWorkflowError: called outside workflow code (in a step, use
            ``asyncio.sleep``).
    """
    if isinstance(duration, timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
        seconds = float(duration)
    else:
        raise TypeError(
            f"sleep() takes seconds (int or float) or a timedelta, not {type(duration).__name__}"
        )
    if seconds != seconds:
        raise ValueError("sleep() needs a number of seconds, got NaN")
    await _runtime.current().sleep(seconds)


async def sleep_until(when: datetime) -> None:
    """A durable timer until the moment ``when`` (an aware ``datetime``), like ``sleep``.

    The timer is recorded in the run's log with ``when`` as its due time, so a
    worker that restarts waits only what is left. A moment not later than the
    workflow's ``now()`` still records a timer, due at once: the run goes on at
    its next task without waiting, and replay meets the same recorded timer
    (``now()`` is the time of the event being processed, the same on replay).

    Raises:
        TypeError: ``when`` is not a ``datetime``, or is naive (no time zone: it
            would mean a different moment on each host).
        NotInWorkflowError: called outside workflow code.
    """
    if not isinstance(when, datetime):
        raise TypeError(f"sleep_until() takes a datetime, not {type(when).__name__}")
    if when.tzinfo is None or when.utcoffset() is None:
        raise TypeError(
            f"sleep_until() needs an aware datetime (with a time zone, e.g. tzinfo=UTC), "
            f"got the naive {when.isoformat()}"
        )
    await _runtime.current().sleep_until(when)


async def rate_limit(
    key: str, value: AttributeValue, *, limit: int, per: float | timedelta
) -> None:
    """Wait durably until this run holds a token of the pair (``key``, ``value``):
    at most ``limit`` tokens per sliding window of ``per`` (seconds or a
    ``timedelta``), handed out in call order across every run of the world.

    ``await rate_limit("customer", "c-9", limit=10, per=60)`` before a step that
    calls an external API keeps the calls for customer c-9 at ten a minute. The
    token is taken when the call commits and recorded in the run's log with its
    time; the run then waits on a durable timer until that time, holding no
    worker. Replay answers from the log and never takes a second token. Runs
    started with ``RateLimited`` values of the same pair share its window.

    Raises:
        TypeError / ValueError: a bad pair, ``limit`` (an int, 1-1000000) or
            ``per`` (more than 0 seconds, at most 100 years); or the pair is rate
            limited at another rate by its recent tokens (one rate per pair).
        NotInWorkflowError: called outside workflow code.
    """
    key, value = check_pair(key, value)
    seconds = _per_seconds(per)
    check_rate(f"rate_limit({quoted(key)})", limit, seconds)
    await _runtime.current().rate_limit(key, value, limit, seconds)


def _per_seconds(per: object) -> float:
    if isinstance(per, bool) or not isinstance(per, int | float | timedelta):
        raise TypeError(f"per is seconds or a timedelta, not {type(per).__name__}")
    return per.total_seconds() if isinstance(per, timedelta) else float(per)


def hold(
    key: str, value: AttributeValue, limit: int = 1, *, priority: int = 0
) -> AbstractAsyncContextManager[None]:
    """A durable semaphore: ``async with hold(key, value, limit=n):`` runs its block
    while this run holds one of ``n`` slots of the pair (``key``, ``value``).

    Entering takes a free slot, or waits in line for one: first in, first out
    per pair, holding no worker (the run's workflow task ends; the world wakes
    it when a slot frees), and a full pair never delays other pairs. The slot
    is given back when the block exits, however it exits, or when the run
    closes, whatever its outcome. Cancelling the run while it waits ends the
    wait with ``CancelledError`` and gives up its place in line. Slots are the
    rows ``Limited`` takes at start (the same pair may be limited both ways),
    listed by ``wf attributes holders KEY VALUE``. Acquire and release are
    recorded in the log, so replay answers them from there.

    A run holds a pair once at a time: entering a second ``hold`` of a pair it
    already holds or waits for raises ``ValueError`` (it could only deadlock).
    ``priority`` (an int, 0 by default) orders the line: when a slot frees, the
    waiter with the lowest number goes first, first in first out within a number.

    Raises:
        TypeError: ``limit`` is not an int.
        ValueError: the key or value is not a valid attribute pair, ``limit`` is
            outside 1-1000000, or this run already holds the pair.
        NotInWorkflowError: called outside workflow code (a step cannot wait
            durably; hold the slot in the workflow around the step call).
    """
    key, value = check_pair(key, value)
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"hold() takes an int limit, not {type(limit).__name__}")
    if not 1 <= limit <= 1_000_000:
        raise ValueError(f"limit of hold({quoted(key)}) must be 1-1000000, got {limit}")
    priority = check_priority(priority)
    return _runtime.current().hold(key, value, limit, priority)


def create_hook(
    token: str | None = None, attributes: Mapping[str, AttributeValue] | None = None
) -> Hook:
    """A hook that ``resume_hook(token, payload)`` resumes from outside the run.

    The token is the run's until it closes; ``continue_as_new`` hands it to the
    next run with the payloads this run did not read, which that run's
    ``create_hook`` with the same token receives first, in order.
    """
    return _runtime.current().create_hook(token, dict(attributes) if attributes else None)


def receive_updates(name: str) -> AsyncIterator[Update]:
    """The updates callers send to this run under ``name`` (``Run.update``), in the
    order the run's log received them: ``async for update in receive_updates("add")``.

    Answer each once, ``await update.reply(value)`` or ``await update.reject(message)``;
    an update the body never answers fails its callers with ``UpdateFailedError``
    once the run closes. Updates sent before the body asks for ``name`` wait for
    it. The iteration ends only when the body leaves it (``break``, ``return``).

    Raises:
        NotInWorkflowError: called outside workflow code.
        TypeError / ValueError: ``name`` is not 1-256 characters of text.
    """
    return _runtime.current().receive_updates(check_update_name("update name", name))


def patched(name: str) -> bool:
    """Whether this run takes the new branch of a code change named ``name``.

    ``if patched("discount-v2"): <new code> else: <old code>`` lets a deploy
    change workflow code while runs are in flight. It answers True for a run
    that reaches this point under the new code (and records a marker, once per
    name), and for a run whose log holds the marker; False for a run whose log
    shows it went past this point under the old code (the log goes on with
    other calls and no marker), so replaying it meets the calls it recorded.
    The answer is fixed for the rest of the run. Once no open run took the old
    branch, delete it and the ``patched`` call: a recorded marker nobody asks
    about is passed over on replay.

    Raises:
        ValueError: ``name`` is empty or longer than 256 characters.
        NotInWorkflowError: called outside workflow code.
    """
    if not isinstance(name, str) or not 1 <= len(name) <= 256:
        raise ValueError(f"a patch name is 1-256 characters of text, got {quoted(name)}")
    return _runtime.current().patched(name)


def now() -> datetime:
    """The current time, replay-safe: the time of the event being processed."""
    return _runtime.current().now()


def random() -> float:
    """A random float in [0, 1), replay-safe (seeded by the run)."""
    return _runtime.current().random()


def uuid4() -> UUID:
    """A random UUID, replay-safe (seeded by the run)."""
    return _runtime.current().uuid4()


def get_run_metadata() -> RunMetadata:
    """The current run's id, workflow name and creation time, in a workflow or a step.

    Raises:
        NotInWorkflowError: called outside workflow and step code.
    """
    return _runtime.current().run_metadata()


def get_step_metadata() -> StepMetadata:
    """The current step attempt's run id, step id, attempt and claim generations."""
    return _runtime.current().step_metadata()


def continue_as_new(*args: Any) -> NoReturn:
    """Close this run and start a new run of the same workflow with ``args``."""
    _runtime.current().continue_as_new(args)
    raise AssertionError("continue_as_new returned")  # pragma: no cover


async def write_stream(name: str, value: Any) -> None:
    """Append ``value`` (anything a step may return) to this run's stream ``name``.

    Any process follows it with ``get_run(run_id).stream(name)`` (or ``wf runs
    stream RUN NAME``), from any offset, live until the run closes. In workflow
    code the write is recorded in the log and appended when it commits: replay
    never writes it twice. In a step it is appended at once, as the attempt
    makes it: an attempt that fails and is retried writes its chunks again, so
    readers see the chunks of every attempt (put the attempt in the value, from
    ``get_step_metadata()``, if a reader must tell them apart).

    Raises:
        ValueError: ``name`` is empty or longer than 256 characters.
        TypeError: ``value`` cannot be recorded.
        NotInWorkflowError: called outside workflow and step code.
    """
    check_name(name)
    await _runtime.current().write_stream(name, encode_result(value, "the stream chunk"))


async def close_stream(name: str) -> None:
    """Close this run's stream ``name``: its readers stop after the last chunk, before
    the run ends.

    ``get_run(run_id).stream(name)`` (following) ends once it has read every chunk
    written before the close, instead of waiting for the run to close. The close is
    recorded in the run's log and takes effect when it commits, after the chunks
    the body wrote before it; replay never closes twice. After it, ``write_stream``
    to that stream raises ``StreamClosedError``, in the workflow and in its steps.
    Closing a closed stream does nothing; a run's streams end with the run anyway.

    Raises:
        ValueError: ``name`` is empty or longer than 256 characters.
        NotInWorkflowError: called outside workflow code (a step cannot close a
            stream: close it in the workflow, after the step).
    """
    check_name(name)
    await _runtime.current().close_stream(name)
