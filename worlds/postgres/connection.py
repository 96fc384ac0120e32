"""The PostgreSQL world's connections: URL, retries, hung-link detection, the server's clock.

asyncpg has no option for TCP keepalives, so ``set_keepalive`` sets them on
each new connection's socket, with ``TCP_USER_TIMEOUT`` so that a link that
acknowledges nothing (black-holed) fails within the command timeout.
``ServerClock`` estimates the server's clock from this process's clock and
their measured offset, so the times a world object writes are the server's.

A URL may list several hosts, a primary and its standbys (``parse_url``):
each new connection goes to the first host that accepts writes, so after a
failover the pool's new connections find the promoted standby.

Hung connections are detected: besides the command timeout, TCP connections
to the server send keepalives after 5 s of silence and give up on a link that
acknowledges nothing for ``command_timeout`` (``TCP_USER_TIMEOUT``), and the
server is asked to probe its side the same way. A frozen server or a
black-holed link makes operations fail with ``WorldUnavailableError`` within
two command timeouts (asyncpg also waits up to one for its cancel request to
reach the server); the broken connections are dropped and later operations
connect again when the server is back.
"""

from __future__ import annotations

import re
import secrets
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias, TypeVar
from urllib.parse import parse_qsl, urlencode

import anyio
import asyncpg

from worlds._urls import check_hosts, redact_url

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]
    """A connection of the world: its own (the listener) or one lent by its pool."""
    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
    """The world's connection pool."""

__all__ = [
    "KEEPALIVE_SETTINGS",
    "MIGRATION_TIMEOUT",
    "RETRIES",
    "RETRYABLE",
    "ServerClock",
    "backoff",
    "check_schema_name",
    "keep_session",
    "parse_url",
    "retry",
    "set_keepalive",
]

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


def set_keepalive(conn: Connection, user_timeout: float) -> None:
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

    async def measure(self, conn: Connection) -> None:
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

    async def refresh(self, pool: Pool) -> None:
        """Measure again on a connection of ``pool`` if the last measurement is old."""
        if anyio.current_time() - self._checked_at >= _CLOCK_CHECK:
            async with pool.acquire() as conn:
                await self.measure(conn)


T = TypeVar("T")

RETRIES = 8
"""Attempts of a transaction that loses deadlock or serialization races."""
RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)
"""Errors after which the same transaction is tried again."""


async def retry(call: Callable[..., Awaitable[T]], *args: object) -> T:
    """``call(*args)``, one statement, again if it lost a deadlock race."""
    for attempt in range(RETRIES - 1):
        try:
            return await call(*args)
        except RETRYABLE:
            await anyio.sleep(backoff(attempt))
    return await call(*args)


def backoff(attempt: int) -> float:
    """Seconds to sleep before retry ``attempt`` (0-based): exponential, with jitter."""
    return 0.001 * float(2**attempt) + secrets.randbelow(1000) / 1e6


_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain identifier PostgreSQL keeps as written, else ``ValueError``."""
    if not _SCHEMA_NAME.fullmatch(name):
        raise ValueError(f"schema name {name!r} must match {_SCHEMA_NAME.pattern}")
    return name


_WRITABLE_TARGETS = ("read-write", "primary", "any")
"""``target_session_attrs`` values that can lead to a server accepting writes."""
_READING_TARGETS = ("read-only", "standby", "prefer-standby")
"""libpq's other values: they lead to standbys, where the world cannot write."""
_FAILOVER_TARGET = "read-write"
"""What a URL listing several hosts asks for when it names no target: the primary."""


def parse_url(raw: str) -> tuple[str, str, dict[str, float]]:
    """The DSN for asyncpg, the schema and this world's own options of ``raw``.

    A URL may list several hosts (``postgresql://h1:5432,h2:5432/db``, or
    ``?host=h1,h2&port=5432,5433``), a primary and its standbys: connections
    go to the first one that accepts writes, tried in order, so after a
    failover the world finds the promoted standby. Such a URL gets
    ``target_session_attrs=read-write`` unless it names another target
    (``primary``, or ``any`` to take the first host that answers). Targets that
    lead to standbys are refused, as is a list of ports that does not match
    the hosts: ``ValueError`` naming the part that is wrong.
    """
    url = redact_url(raw)  # for messages
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower().split("+", 1)[0] not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL world URL: {url!r}")
    location, _, query = rest.partition("?")
    try:
        check_hosts(location)
    except ValueError as exc:
        raise ValueError(f"malformed world URL {url!r}: {exc}") from None
    options = {"poll": 1.0, "pool_size": 10.0, "command_timeout": 4.0}
    schema = "public"
    passed: list[tuple[str, str]] = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "schema":
            schema = check_schema_name(value)
        elif name in options:
            try:
                options[name] = float(value)
            except ValueError:
                raise ValueError(f"option {name!r} in {url!r} must be a number") from None
            if options[name] <= 0:
                raise ValueError(f"option {name!r} in {url!r} must be positive")
        else:
            passed.append((name, value))
    passed = _with_target(location, passed, url)
    dsn = f"postgresql://{location}" + (f"?{urlencode(passed)}" if passed else "")
    return dsn, schema, options


def _with_target(location: str, passed: list[tuple[str, str]], url: str) -> list[tuple[str, str]]:
    """``passed`` (the driver's query options) checked for failover, with the target
    a list of hosts needs when the URL names none."""
    given = dict(passed)
    netloc = location.split("/", 1)[0].rpartition("@")[2]
    hosts = netloc.split(",") if netloc else given.get("host", "").split(",")
    ports = given.get("port", "").split(",") if given.get("port") else []
    if len(hosts) > 1 and any(not host.strip() for host in hosts):
        raise ValueError(f"malformed world URL {url!r}: an empty host in the list {hosts!r}")
    if len(ports) > 1 and len(ports) != len(hosts):
        raise ValueError(
            f"malformed world URL {url!r}: {len(ports)} ports for {len(hosts)} hosts"
            " (give one port for all, or one per host)"
        )
    target = given.get("target_session_attrs")
    if target is None:
        if len(hosts) > 1:
            passed = [*passed, ("target_session_attrs", _FAILOVER_TARGET)]
        return passed
    if target in _READING_TARGETS:
        raise ValueError(
            f"world URL {url!r}: target_session_attrs={target} leads to standbys, where"
            f" the world cannot write; use {' or '.join(_WRITABLE_TARGETS)}"
        )
    if target not in _WRITABLE_TARGETS:
        raise ValueError(
            f"world URL {url!r}: target_session_attrs must be one of"
            f" {', '.join(_WRITABLE_TARGETS)}, not {target!r}"
        )
    return passed


async def keep_session(conn: Connection) -> None:
    """Pool reset hook: sessions carry no state to undo, so skip the reset round trip."""
