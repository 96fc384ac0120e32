"""What every durable world shares about its lifecycle: ``async with`` and closing,
and the translation of driver errors at its boundary."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Self, TypeVar

from worlds.errors import WorldClosedError, as_world_error

__all__ = ["ClosesOnExit", "WorldClosedError", "translates_errors"]

C = TypeVar("C", bound=type)


def translates_errors(cls: C) -> C:
    """Make every public ``async`` method of ``cls`` raise driver errors as ``WorldError``.

    A database driver's exception (sqlite3, asyncpg, ``OSError``, a timeout)
    that ``as_world_error`` recognises is raised as the matching ``WorldError``
    subclass, chained to the original; any other exception goes through as it
    is. Callers then decide from the class alone whether to retry or stop.
    Before a translated error leaves, the world's ``_on_world_error(cause)`` is
    awaited when its class defines one (the PostgreSQL world drops its
    connections after a read-only server's answer).
    """
    for name in dir(cls):
        method = inspect.getattr_static(cls, name)
        # inherited ones too: a backend's entry points may live in its base class
        if (
            not name.startswith("_")
            and inspect.iscoroutinefunction(method)
            and not getattr(method, "translates_errors", False)
        ):
            setattr(cls, name, _translating(method))
    return cls


def _translating(
    method: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(method)
    async def translated(*args: Any, **kwargs: Any) -> Any:
        try:
            return await method(*args, **kwargs)
        except Exception as exc:
            error = as_world_error(exc)
            if error is None:
                raise
            hook = getattr(args[0], "_on_world_error", None) if args else None
            if hook is not None:
                await hook(exc)
            if error is exc:
                raise
            raise error from exc

    translated.translates_errors = True  # type: ignore[attr-defined]
    return translated


class ClosesOnExit:
    """``async with world:`` returns the world; the world's one lifecycle rule.

    Entering opens the world if it is closed (its connections still open lazily,
    on the first operation). Entries are counted, nested or one after another,
    and the last exit closes the world, so ``async with world:`` may be written
    again after a first block, or inside one, on every world. ``close()`` closes
    at once whatever the count; the next entry opens the world again. A subclass
    says what closing releases (``_release``) and what opening again resets
    (``_reopen``).
    """

    _entries = 0

    async def close(self) -> None:
        """Release connections; the world refuses calls until it is entered again."""
        self._entries = 0
        await self._release()

    async def _release(self) -> None:
        """Release what the world holds and refuse calls from now on."""
        raise NotImplementedError

    def _reopen(self) -> None:
        """Accept calls again after ``close``; connections open on first use."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        if self._entries == 0:
            self._reopen()
        self._entries += 1
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._entries > 0:  # zero: ``close()`` ran inside the block
            self._entries -= 1
            if self._entries == 0:
                await self.close()
