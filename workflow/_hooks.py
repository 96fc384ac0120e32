"""The ``Hook`` handle that ``create_hook`` returns inside a workflow."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Generator
from typing import Any

__all__ = ["Hook"]


class Hook(ABC, AsyncIterator[Any]):
    """A point where a workflow waits for payloads sent from outside.

    ``await hook`` gives the next payload; ``async for payload in hook`` gives
    them all. Anyone holding ``token`` delivers one with ``resume_hook``.
    """

    token: str

    @abstractmethod
    async def receive(self) -> Any:
        """Wait for and return the next payload."""

    def __await__(self) -> Generator[Any, None, Any]:
        return self.receive().__await__()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        return await self.receive()
