"""Which log entries are commands: calls the workflow body issued.

A command is matched by position against the body's calls on replay; every
other entry is an external event, delivered to the body in log order. Both
switches are exhaustive over ``EventKind``: mypy flags a new event kind here
until it is classified, and at run time an unknown kind raises.
"""

from __future__ import annotations

from typing import assert_never

from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ChildClosed,
    ChildConflict,
    ChildStarted,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    PatchMarker,
    RunCancelled,
    RunCancelRequested,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunForked,
    RunReopened,
    RunStarted,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StreamWritten,
    WaitCompleted,
    WaitCreated,
)

__all__ = ["describe", "is_command"]


def is_command(event: EventKind) -> bool:
    """True for what the workflow body issued (matched by position on replay),
    False for what happened to the run (delivered to the body in log order)."""
    match event:
        case AttributeSet() | AttributeConflict():
            return event.step is None  # a step's attribute is its own business
        case (
            StepCreated()
            | WaitCreated()
            | HookCreated()
            | HookConflict()
            | RunCompleted()
            | RunFailed()
            | RunContinued()
            | RunCancelled()
            | ChildStarted()
            | ChildConflict()
            | PatchMarker()
            | StreamWritten()
            | SlotRequested()
            | SlotReleased()
        ):
            return True
        case (
            RunCreated()
            | RunStarted()
            | RunCancelRequested()
            | StepStarted()
            | StepCompleted()
            | StepRetrying()
            | StepFailed()
            | StepDiscarded()
            | WaitCompleted()
            | HookReceived()
            | ChildClosed()
            | RunReopened()
            | RunForked()
            | SlotAcquired()
        ):
            return False
        case _:
            assert_never(event)


def describe(event: EventKind) -> str:
    """A recorded command as ``NonDeterminismError`` names it."""
    match event:
        case StepCreated():
            return f"step {event.name!r}"
        case WaitCreated():
            return "a timer"
        case AttributeSet() | AttributeConflict():
            return f"set_attribute({event.key!r})"
        case HookCreated() | HookConflict():
            return "create_hook"
        case RunCompleted() | RunFailed() | RunContinued() | RunCancelled():
            return "the end of the workflow"
        case ChildStarted():
            return f"start({event.workflow!r})"
        case ChildConflict():
            return "start() of a child run"
        case PatchMarker():
            return f"patched({event.name!r})"
        case StreamWritten():
            return f"write_stream({event.name!r})"
        case SlotRequested():
            return f"hold({event.key!r}, {event.value!r})"
        case SlotReleased():
            return "the end of a hold() block"
        case (
            RunCreated()
            | RunStarted()
            | RunCancelRequested()
            | StepStarted()
            | StepCompleted()
            | StepRetrying()
            | StepFailed()
            | StepDiscarded()
            | WaitCompleted()
            | HookReceived()
            | ChildClosed()
            | RunReopened()
            | RunForked()
            | SlotAcquired()
        ):
            raise AssertionError(f"{type(event).__name__} is not a command; nothing issues it")
        case _:
            assert_never(event)
