"""Which log entries are commands, and how a recorded command is named.

The split itself is written once, in ``worlds.events``: ``CommandEvent`` (what
the workflow body issues, matched by position on replay) and ``ExternalEvent``
(what happens to the run, delivered to the body in log order), whose union is
``EventKind``. ``issuing_call`` is exhaustive over the commands: mypy flags a
new command kind here until it has a name.
"""

from __future__ import annotations

from typing import TypeGuard, assert_never, get_args

from worlds.events import CommandEvent, ExternalEvent
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ChildConflict,
    ChildStarted,
    EventKind,
    HookConflict,
    HookCreated,
    PatchMarker,
    RateTokenRequested,
    RunCancelled,
    RunCompleted,
    RunContinued,
    RunFailed,
    SlotReleased,
    SlotRequested,
    StepCreated,
    StreamClosed,
    StreamWritten,
    UpdateRejected,
    UpdateReplied,
    WaitCreated,
)

__all__ = ["is_command", "is_external", "issuing_call"]

# a set of types: one lookup per event, where isinstance of a union tries each member
_COMMANDS: frozenset[type] = frozenset(get_args(CommandEvent))
_EXTERNALS: frozenset[type] = frozenset(get_args(ExternalEvent))


def is_external(event: EventKind) -> TypeGuard[ExternalEvent]:
    """True for what happened to the run: delivered to the body in log order."""
    return type(event) in _EXTERNALS


def is_command(event: EventKind) -> TypeGuard[CommandEvent]:
    """True for what the workflow body issued: matched by position on replay.

    A step attempt's ``AttributeSet``/``AttributeConflict`` is not: it is the
    attempt's own record, which the body never sees. An event of no kind in
    ``EventKind`` raises ``AssertionError``.
    """
    if isinstance(event, (AttributeSet, AttributeConflict)):
        return event.step is None
    if type(event) in _COMMANDS:
        return True
    if type(event) in _EXTERNALS:
        return False
    raise AssertionError(f"{type(event).__name__} (seq {event.seq}) is of no known event kind")


def issuing_call(command: CommandEvent) -> str:
    """The call that issues ``command``, as ``NonDeterminismError`` names it."""
    match command:
        case StepCreated():
            return f"step {command.name!r}"
        case WaitCreated():
            return "a timer"
        case AttributeSet() | AttributeConflict():
            return f"set_attribute({command.key!r})"
        case HookCreated() | HookConflict():
            return "create_hook"
        case RunCompleted() | RunFailed() | RunContinued() | RunCancelled():
            return "the end of the workflow"
        case ChildStarted():
            return f"start({command.workflow!r})"
        case ChildConflict():
            return "start() of a child run"
        case PatchMarker():
            return f"patched({command.name!r})"
        case StreamWritten():
            return f"write_stream({command.name!r})"
        case StreamClosed():
            return f"close_stream({command.name!r})"
        case SlotRequested():
            return f"hold({command.key!r}, {command.value!r})"
        case SlotReleased():
            return "the end of a hold() block"
        case RateTokenRequested():
            return f"rate_limit({command.key!r}, {command.value!r})"
        case UpdateReplied():
            return f"reply to update {command.update_id!r}"
        case UpdateRejected():
            return f"reject update {command.update_id!r}"
        case _:
            assert_never(command)
