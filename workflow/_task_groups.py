"""Leaving a task group that a public ``async with`` object holds open.

A task group wraps whatever leaves it in an ``ExceptionGroup``, even the one
error raised by the code inside ``async with Worker(...)``. Users of a context
manager expect ``except ValueError`` around the block to catch a ``ValueError``
raised in it, so an object that keeps a task group open for its block leaves it
through ``exit_task_group``: a single error comes out as itself; only several
errors at once stay a group.
"""

from __future__ import annotations

import types

import anyio.abc

__all__ = ["exit_task_group", "sole_error"]


def sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one error inside ``group`` (nested groups flattened), or ``None`` if several."""
    found: BaseException | None = None
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        elif found is None:
            found = current
        else:
            return None
    return found


async def exit_task_group(
    group: anyio.abc.TaskGroup,
    exc_type: type[BaseException] | None,
    exc: BaseException | None,
    tb: types.TracebackType | None,
) -> bool | None:
    """``group.__aexit__``, with a single error re-raised as itself.

    Returns what the task group returns (true: ``exc`` was absorbed, a
    cancellation of the group's own scope).

    Raises:
        BaseException: the one error that left the group (``exc`` itself, with its
            traceback and context untouched, when it is the body's own), or the
            ``BaseExceptionGroup`` when several errors left it together.
    """
    single: BaseException | None = None
    try:
        return await group.__aexit__(exc_type, exc, tb)
    except BaseExceptionGroup as raised:
        single = sole_error(raised)
        if single is None:
            raise
    assert single is not None
    if single is exc:
        return False  # the with statement re-raises the body's own error unchanged
    raise single
