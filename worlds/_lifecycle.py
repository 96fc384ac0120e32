"""What every durable world shares about its lifecycle: ``async with`` and closing."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from worlds.errors import WorldClosedError

__all__ = ["ClosesOnExit", "WorldClosedError"]


class ClosesOnExit:
    """``async with world:`` returns the world and closes it on the way out."""

    async def close(self) -> None:
        """Release connections; subclasses say what they hold."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
