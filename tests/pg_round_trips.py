"""Counting PostgreSQL protocol round trips: a TCP proxy that reads the server's replies.

``RoundTripProxy(host, port)`` listens on 127.0.0.1 and forwards every byte
both ways, unchanged, between its clients and the server. It parses the
server's side of the (version 3) protocol and counts ``ReadyForQuery``
messages: the server sends exactly one at the end of each simple query and of
each extended-protocol batch (ending with ``Sync``) that a client sends and
then waits for, so the count is the number of round trips clients made
(including connection start-up, prepares and ``BEGIN``/``COMMIT``). The proxy
does not parse the client's side; a client that pipelined several ``Sync``
batches would count once per batch. TLS is not supported (the test server
does not use it).

Usage::

    async with RoundTripProxy("127.0.0.1", 5432) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        ...
        before = proxy.round_trips
"""

from __future__ import annotations

import asyncio
import struct
from types import TracebackType
from urllib.parse import parse_qsl, urlsplit

__all__ = ["RoundTripProxy", "server_address"]


def server_address(url: str) -> tuple[str, int]:
    """The TCP host and port of the server at ``url`` (a unix-socket URL of
    ``tests/pg_server.py``: its 127.0.0.1 listener on the same port)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    host = query.get("host") or parts.hostname or "127.0.0.1"
    port = int(query.get("port") or parts.port or 5432)
    return ("127.0.0.1" if host.startswith("/") else host), port


class RoundTripProxy:
    """Forward TCP connections to ``host:port`` and count the server's ``ReadyForQuery``."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.server_port = port
        self.round_trips = 0
        """``ReadyForQuery`` messages the server sent so far, over all connections."""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def url(self, user: str = "postgres", database: str = "postgres") -> str:
        """A URL that reaches the server through this proxy (TLS off)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}?sslmode=disable"

    async def __aenter__(self) -> RoundTripProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(
            self.host, self.server_port
        )
        for copy in (
            self._copy(reader, upstream_writer, count=False),
            self._copy(upstream_reader, writer, count=True),
        ):
            task = asyncio.ensure_future(copy)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _copy(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, count: bool
    ) -> None:
        pending = b""
        try:
            while chunk := await reader.read(65536):
                if count:
                    pending = self._count(pending + chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _count(self, data: bytes) -> bytes:
        """Count the complete messages' ``ReadyForQuery`` in ``data``; return the rest."""
        offset = 0
        while len(data) - offset >= 5:
            kind = data[offset : offset + 1]
            (length,) = struct.unpack_from("!i", data, offset + 1)
            if len(data) - offset < 1 + length:
                break
            if kind == b"Z":
                self.round_trips += 1
            offset += 1 + length
        return data[offset:]
