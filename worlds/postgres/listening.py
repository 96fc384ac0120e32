"""The PostgreSQL world's listener: one connection that ``LISTEN``s and wakes ``wait`` callers.

Notifications from every process sharing the schema arrive on this connection
and wake the callers waiting on their topic (a ``SignalHub``). It subscribes
only to the channels callers asked for. While it is down, ``wait`` polls and
reopens it at most once per ``poll`` interval.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable
from typing import TYPE_CHECKING

import anyio
import asyncpg

from worlds._signals import SignalHub
from worlds.postgres.connection import set_keepalive
from worlds.protocol import RUNS_TOPIC, is_run_topic, run_topic

if TYPE_CHECKING:
    from worlds.postgres.connection import Connection

__all__ = ["Listener"]

_LISTEN_TIMEOUT = 5.0
"""Seconds to open the listener connection before falling back on polling."""

_RUN_PREFIX = run_topic("")

_HERE_LIMIT = 10_000
"""Runs remembered as run here at most; past it the oldest is forgotten (a wait
on it then subscribes to the runs channel, as for any run)."""


class Listener:
    """The listener connection of one PostgreSQL world object, and who waits on it."""

    def __init__(
        self,
        dsn: str,
        settings: dict[str, str],
        *,
        command_timeout: float,
        poll_interval: float,
        channels: tuple[str, str],
    ) -> None:
        """Connect to ``dsn`` with ``settings``; ``channels``: the work and the runs channel."""
        self._dsn = dsn
        self._settings = settings
        self._command_timeout = command_timeout
        self._poll_interval = poll_interval
        self._channel, self._run_channel = channels
        self._channels: set[str] = set()
        """The channels ``wait`` callers asked for; the listener subscribes to them."""
        self._listener: asyncpg.Connection[asyncpg.Record] | None = None
        self._subscribing: anyio.Lock | None = None
        """Serialises use of the listener connection (one operation at a time)."""
        self.hub = SignalHub()
        self._listen_again_at = 0.0
        self._here: dict[str, None] = {}
        """Runs started with their workflow leased to a Worker of this world object,
        not yet closed by it: their close is signalled here (``closed_here``)."""

    def running_here(self, run_id: str) -> None:
        """Note that this world object's own Worker runs ``run_id`` (leased at its start)."""
        self._here[run_id] = None
        if len(self._here) > _HERE_LIMIT:
            del self._here[next(iter(self._here))]

    def runs_here(self, run_id: str) -> bool:
        """Whether this world object's own Worker runs ``run_id`` (``running_here``).

        Its close then notifies no other process: every ``NOTIFY`` wakes every
        listening connection of the database, each reading the queue in a
        transaction of its own, whatever channels it listens to, so one
        notification per run would cost each worker process one transaction of
        the server per run. A waiter in another process notices such a close
        at its poll interval (``Run.result`` reads the run at least once a second).
        """
        return run_id in self._here

    def closed_here(self, topics: Iterable[str]) -> None:
        """Wake this world object's waiters on the run topics among ``topics`` now, as
        a commit of this world object made them true (not a notification later)."""
        for topic in topics:
            if is_run_topic(topic):
                self._here.pop(topic.removeprefix(_RUN_PREFIX), None)
                self.hub.signal(topic)

    def detach(self) -> asyncpg.Connection[asyncpg.Record] | None:
        """Stop using the listener connection; the caller closes what this returns."""
        listener, self._listener = self._listener, None
        return listener

    async def listen(self) -> None:
        """Open the listener connection; on failure ``wait`` polls until it is back."""
        try:
            listener = await asyncpg.connect(
                self._dsn,
                server_settings=self._settings,
                timeout=min(_LISTEN_TIMEOUT, self._command_timeout),
                command_timeout=self._command_timeout,
            )
            set_keepalive(listener, self._command_timeout)
        except (OSError, asyncpg.exceptions.PostgresError):
            self._listen_again_at = anyio.current_time() + self._poll_interval
            return
        listener.add_termination_listener(self._on_listener_lost)
        for channel in sorted(self._channels):
            await listener.add_listener(channel, self._on_notification)
        self._listener = listener
        # Changes made while nobody listened may have been missed: wake everyone.
        self.hub.wake_all()

    def _on_notification(self, conn: Connection, pid: int, channel: str, payload: object) -> None:
        self.hub.signal(str(payload))

    def _on_listener_lost(self, conn: Connection) -> None:
        if self._listener is conn:
            self._listener = None

    def _channel_of(self, topic: str) -> str:
        """A run's topic and ``RUNS_TOPIC`` ride the runs channel, every other the
        work channel (``statements.NOTIFY`` routes them so)."""
        on_runs = is_run_topic(topic) or topic == RUNS_TOPIC
        return self._run_channel if on_runs else self._channel

    def heard(self, topic: str, names: Collection[str] = ()) -> Hashable | None:
        """A token that changes with every notification of ``topic`` (for a poll of
        ``names``: ``SignalHub.heard``), the change token of ``worlds._quiet``;
        ``None`` while notifications of it may be missed: the listener is down, or
        nobody waited on its channel yet (it is not subscribed)."""
        if self._listener is None or self._channel_of(topic) not in self._channels:
            return None
        return (id(self._listener), self.hub.heard(topic, names))

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``PostgresWorld.wait`` (called once the world is connected).

        A wait on a run this world object runs (``running_here``) subscribes to
        nothing: its close is signalled here by the commit that makes it. So a
        process that waits only on its own runs does not listen on the runs
        channel, and no notification costs its listener a transaction of the
        server. A close made elsewhere (another worker took the run over, a
        cancel) wakes it only if the channel is subscribed for other waits, else
        after the poll interval, when the caller reads the run again."""
        if is_run_topic(topic) and topic.removeprefix(_RUN_PREFIX) in self._here:
            await self.hub.wait(topic, min(timeout, self._poll_interval))
            return
        channel = self._channel_of(topic)
        if self._subscribing is None:
            self._subscribing = anyio.Lock()
        if channel not in self._channels:
            # Heard nothing of this channel so far: subscribe, and let the
            # caller look again (what it waits for may have happened already).
            async with self._subscribing:
                if channel not in self._channels:
                    self._channels.add(channel)
                    if self._listener is not None:
                        await self._listener.add_listener(channel, self._on_notification)
            await anyio.sleep(0)
            return
        if self._listener is None and anyio.current_time() >= self._listen_again_at:
            async with self._subscribing:
                if self._listener is None:
                    await self.listen()
        limit = self._poll_interval if self._listener is not None else 0.05
        await self.hub.wait(topic, min(timeout, limit))
