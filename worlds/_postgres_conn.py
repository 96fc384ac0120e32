"""The PostgreSQL world's connections: hung-link detection and the server's clock.

asyncpg has no option for TCP keepalives, so ``set_keepalive`` sets them on
each new connection's socket, with ``TCP_USER_TIMEOUT`` so that a link that
acknowledges nothing (black-holed) fails within the command timeout.
``ServerClock`` estimates the server's clock from this process's clock and
their measured offset, so the times a world object writes are the server's.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import anyio

__all__ = ["KEEPALIVE_SETTINGS", "MIGRATION_TIMEOUT", "ServerClock", "set_keepalive"]

MIGRATION_TIMEOUT = 3600.0
"""Seconds a migration statement may take (they may rewrite big tables)."""

_KEEPALIVE = {"idle": 5, "interval": 2, "count": 3}
"""TCP keepalive: seconds of silence before probing, between probes, probes lost."""

KEEPALIVE_SETTINGS = {
    "tcp_keepalives_idle": str(_KEEPALIVE["idle"]),
    "tcp_keepalives_interval": str(_KEEPALIVE["interval"]),
    "tcp_keepalives_count": str(_KEEPALIVE["count"]),
}
"""Session settings asking the server to probe its side of the link the same way."""

_CLOCK_CHECK = 5.0
"""Seconds between two measurements of the offset to the server's clock."""
_RESOLUTION = timedelta(milliseconds=1)
"""Offsets this small are not told apart from none."""


def set_keepalive(conn: Any, user_timeout: float) -> None:
    """Turn on TCP keepalives and a user timeout (seconds) on ``conn``'s socket.

    Unix-socket connections are left as they are (a local server that stops
    answering is caught by the command timeout).
    """
    transport = getattr(conn, "_transport", None)
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (
        ("TCP_KEEPIDLE", _KEEPALIVE["idle"]),
        ("TCP_KEEPINTVL", _KEEPALIVE["interval"]),
        ("TCP_KEEPCNT", _KEEPALIVE["count"]),
        ("TCP_USER_TIMEOUT", int(user_timeout * 1000)),
    ):
        if hasattr(socket, option):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class ServerClock:
    """The server's clock, as ``clock`` plus the offset last measured on a connection."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._offset = timedelta(0)
        self._checked_at = float("-inf")

    def now(self) -> datetime:
        """The server's time now, as estimated."""
        return self._clock() + self._offset

    async def measure(self, conn: Any) -> None:
        """Measure the offset on ``conn``.

        An offset within the measurement's uncertainty (half the round trip, at
        least a millisecond) counts as none: the clocks agree as far as anyone can
        tell, and times this process computes itself (a retry's due time) then
        compare with the world's as they would on one host.
        """
        before = self._clock()
        server = await conn.fetchval("SELECT clock_timestamp()")
        after = self._clock()
        offset = server - (before + (after - before) / 2)
        uncertainty = max((after - before) / 2, _RESOLUTION)
        self._offset = offset if abs(offset) > uncertainty else timedelta(0)
        self._checked_at = anyio.current_time()

    async def refresh(self, pool: Any) -> None:
        """Measure again on a connection of ``pool`` if the last measurement is old."""
        if anyio.current_time() - self._checked_at >= _CLOCK_CHECK:
            async with pool.acquire() as conn:
                await self.measure(conn)
