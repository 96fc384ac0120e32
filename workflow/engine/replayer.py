"""Replay a recorded event log against today's workflow code.

Like Temporal's replayer: before deploying a change to a workflow, replay the
logs of real runs to prove the new code makes the same calls in the same order.

::

    Path("checkout.history.json").write_bytes(encode_history(await run.events()))
    ...
    history = Path("checkout.history.json").read_bytes()   # or decode_history(...) of it
    await replay(checkout, history, run_id=run.id)   # NonDeterminismError on divergence
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import msgspec

from workflow.decorators import WorkflowDefinition
from workflow.engine._instance import WorkflowInstance
from workflow.engine._task import Turn, run_task
from workflow.errors import NonDeterminismError
from worlds.archive import ArchivedRun, DumpedRun, decode_archived
from worlds.semantics import CLOSING_EVENTS
from worlds.types import EventKind, RunCreated, RunStarted

__all__ = ["decode_history", "encode_history", "replay"]

_history = msgspec.json.Decoder(list[EventKind])
_EVENT_TYPES = get_args(EventKind)


def encode_history(events: Sequence[EventKind]) -> bytes:
    """A run's event log as JSON, to keep next to the code (binary fields in base64)."""
    return msgspec.json.encode(list(events))


def decode_history(data: bytes | str) -> list[EventKind]:
    """The events ``encode_history`` wrote."""
    return _history.decode(data)


async def replay(
    fn: WorkflowDefinition[..., Any],
    history: Sequence[EventKind] | ArchivedRun | bytes | str,
    *,
    run_id: str | None = None,
) -> None:
    """Run ``fn`` against ``history`` without any world; raise if they disagree.

    ``history`` is a run's events (``await run.events()``), what
    ``encode_history`` made of them, or an exported run (``export_runs``: an
    ``ArchivedRun`` or one line of the file, whose exact log is replayed).
    ``run_id`` is the recorded run's id: it seeds ``random()`` and ``uuid4()``;
    an exported run brings its own.

    Raises:
        NonDeterminismError: the code issued a different call than the log
            recorded, or, for a closed run, a call the log does not have.
        ValueError: ``history`` does not start with ``RunCreated``, names
            another workflow, or is bytes ``encode_history`` did not write.
        TypeError: ``history`` is neither events nor encoded events.
    """
    archived = _archived_of(history)
    if archived is not None:
        head = archived.dump()[0]
        assert isinstance(head, DumpedRun)  # dump() checks it
        history, run_id = head.events, run_id or archived.id
    if run_id is None:
        raise TypeError("replay() needs run_id= unless the history is an exported run")
    events = _events_of(history)
    if not events or not isinstance(events[0], RunCreated):
        raise ValueError("a history starts with RunCreated")
    if events[0].workflow != fn.name:
        raise ValueError(f"the history is of workflow {events[0].workflow!r}, not {fn.name!r}")
    instance = WorkflowInstance(run_id, fn, None)
    closed = isinstance(events[-1], CLOSING_EVENTS)
    try:
        instance.feed(events)
        turn = (await run_task(instance, _nowhere)).turn
        if isinstance(instance.failure, NonDeterminismError):
            raise instance.failure
        new_calls = [e for e in turn.commit.events if not isinstance(e, RunStarted)]
        if closed and (turn.blocked or new_calls):
            issued = type(new_calls[0]).__name__ if new_calls else "a unique claim"
            raise NonDeterminismError(instance.position, "the end of the log", issued)
    finally:
        instance.dispose()


async def _nowhere(turn: Turn) -> None:
    """A replay writes nothing: the task ends after its first turn."""


def _archived_of(history: object) -> ArchivedRun | None:
    """The exported run ``history`` is (or is one line of), or ``None``."""
    if isinstance(history, ArchivedRun):
        return history
    if isinstance(history, (bytes, bytearray, memoryview, str)):
        data = history if isinstance(history, str) else bytes(history)
        if data.lstrip()[:1] in ("{", b"{"):  # a history is a list; an exported run an object
            return decode_archived(data)
    return None


def _events_of(history: object) -> list[EventKind]:
    """The events of what ``replay`` was given: events, or ``encode_history`` output."""
    if isinstance(history, (bytes, bytearray, memoryview, str)):
        data = history if isinstance(history, str) else bytes(history)
        try:
            return decode_history(data)
        except msgspec.DecodeError as exc:
            raise ValueError(f"history is not an encode_history() log: {exc}") from None
    if isinstance(history, Sequence) and all(isinstance(e, _EVENT_TYPES) for e in history):
        return list(history)
    raise TypeError(
        "history must be a run's events (await run.events()) or encode_history() bytes, "
        f"not {type(history).__name__}"
    )
