"""Group commit in the worker: the commits of runs that are ready in the same
loop turn go to the world as one ``commit_many`` (one transaction and one fsync
on SQLite), and each caller gets its own outcome once the batch is durable.

The first caller of a turn leads: it lets the other ready tasks run once, so
their commits join, then sends the batch and hands each follower its result
or its exception. A batch that fails for a reason other than the world being
unavailable is retried one request at a time, so one bad request cannot fail
its neighbours; a world that is unavailable fails every caller, and each
retries as it would a lone commit.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from worlds.errors import as_world_error
from worlds.protocol import World
from worlds.types import CommitRequest, CommitResult

__all__ = ["GroupCommitter"]


@dataclass
class _Entry:
    """One caller's request, and its outcome once the batch is back."""

    request: CommitRequest
    done: anyio.Event | None = None
    """Made by a follower that waits, not by the leader (which never waits on it)."""
    result: CommitResult | None = None
    error: BaseException | None = None
    settled: bool = False

    def settle(self, outcome: CommitResult | BaseException) -> None:
        if isinstance(outcome, CommitResult):
            self.result = outcome
        else:
            self.error = outcome
        self.settled = True
        if self.done is not None:
            self.done.set()

    async def wait(self) -> None:
        """Wait until the batch's leader settled this entry."""
        if not self.settled:
            self.done = anyio.Event()
            await self.done.wait()

    def outcome(self) -> CommitResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None, "an entry is read only once settled"
        return self.result


class GroupCommitter:
    """Commits for one worker, gathered per loop turn into batches.

    Args:
        world: the world to commit to.
        enabled: ``False`` sends every request alone (``world.commit``), as does a
            world whose ``gathers_writes`` is true (SQLite): it puts the writes
            of one loop turn in one transaction itself.
    """

    def __init__(self, world: World, *, enabled: bool = True) -> None:
        self._world = world
        # a world that gathers the writes of a loop turn itself (SQLite) is given each
        # commit at once: gathering here too would cost every commit a second turn
        self._enabled = (
            enabled and callable(getattr(world, "commit_many", None)) and not world.gathers_writes
        )
        self._pending: list[_Entry] = []
        self.batches = 0
        """Batches of more than one request sent so far."""
        self.batched = 0
        """Requests sent in those batches."""

    async def commit(self, request: CommitRequest) -> CommitResult:
        """Commit ``request`` with whatever else is ready this turn; its own outcome.

        Raises:
            Exception: what committing ``request`` alone would raise.
        """
        if not self._enabled:
            return await self._world.commit(request)
        entry = _Entry(request)
        self._pending.append(entry)
        if len(self._pending) > 1:  # a leader of this turn will send it
            await entry.wait()
            return entry.outcome()
        with anyio.CancelScope(shield=True):  # followers wait on this batch
            await anyio.sleep(0)  # let the other tasks ready this turn add theirs
            batch, self._pending = self._pending, []
            await self._send(batch)
        return entry.outcome()

    async def _send(self, batch: list[_Entry]) -> None:
        if len(batch) == 1:
            try:
                batch[0].settle(await self._world.commit(batch[0].request))
            except Exception as exc:
                batch[0].settle(exc)
            return
        self.batches += 1
        self.batched += len(batch)
        try:
            outcomes = await self._world.commit_many([entry.request for entry in batch])
        except Exception as exc:
            if as_world_error(exc) is not None:
                for entry in batch:
                    entry.settle(exc)
                return
            for entry in batch:  # not the world's fault: find the bad request
                try:
                    entry.settle(await self._world.commit(entry.request))
                except Exception as alone:
                    entry.settle(alone)
            return
        for entry, outcome in zip(batch, outcomes, strict=True):
            entry.settle(outcome)
