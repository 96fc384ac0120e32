"""How the worker's polling loops wait when a poll found nothing.

The work loop (``Worker._dispatch``) and the schedule loop wait here between
polls that found nothing. A world with ``World.wait_idle`` (every built-in
one) keeps them waiting past the poll interval for as long as it can tell
that the same poll would still find nothing, and wakes them when that changes
(a signal or notification, a write by another process, a due time, its safety
interval): an idle worker calls its world only when something may have
changed (RFC 0018, "Idle cost"). A world without it gets ``World.wait``, the
poll interval at most, as before.

The poll a world remembers is of the names the loop polled with; when the
worker registers more (``Worker.register`` while running), ``interrupt`` ends
the waits so the loops poll again with the new names.
"""

from __future__ import annotations

from collections.abc import Collection

import anyio

from worlds.protocol import World

__all__ = ["IdleWait"]


class IdleWait:
    """The idle waits of one worker's loops on its world."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._scopes: set[anyio.CancelScope] = set()

    async def wait(self, topic: str, names: Collection[str], timeout: float) -> None:
        """Wait on ``topic`` after a poll of ``names`` found nothing: at least until a
        signal or ``timeout``, and on while the world can tell nothing changed."""
        with anyio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                await self._wait(topic, names, timeout)
            except Exception:  # a world that cannot wait now: poll again after the interval
                await anyio.sleep(timeout)
            finally:
                self._scopes.discard(scope)

    async def _wait(self, topic: str, names: Collection[str], timeout: float) -> None:
        wait_idle = getattr(self.world, "wait_idle", None)
        if callable(wait_idle):
            await wait_idle(topic, names, timeout)
            return
        with anyio.move_on_after(timeout + 1.0):  # a world's wait that hangs
            await self.world.wait(topic, timeout)

    def interrupt(self) -> None:
        """End every wait now: the loops poll again (the worker's names changed)."""
        for scope in self._scopes:
            scope.cancel()
