"""A worker's commits: group-committed, and retried while the world is in trouble.

Every commit goes through one ``GroupCommitter`` (``send``), so the commits of
one loop turn are one world transaction. ``commit`` adds the worker's manners
for the outcome of a work item: a transient world error is retried with
backoff for as long as the lease is ours (the world refuses a commit under a
lost lease, so a retry never records twice), and a commit that fails
otherwise ``POISON_LIMIT`` times in a row is replaced by a step failure naming
the cause.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from workflow.engine._capacity import Capacity
from workflow.engine._commits import describe_work, poisoned_step_commit
from workflow.engine._faults import POISON_LIMIT, Backoff, Complaints, is_fatal, is_transient
from workflow.engine._group import GroupCommitter
from worlds.protocol import World
from worlds.types import CommitRequest, CommitResult, WorkItem

__all__ = ["Committer"]

log = logging.getLogger("workflow.worker")


class Committer:
    """Commits for one worker (``worker_id``), through one group committer."""

    def __init__(
        self,
        world: World,
        worker_id: str,
        lease_seconds: float,
        capacity: Capacity,
        complaints: Complaints,
    ) -> None:
        self.worker_id = worker_id
        self._lease_seconds = lease_seconds
        self._capacity = capacity
        self._complaints = complaints
        self._group = GroupCommitter(world)
        self.send: Callable[[CommitRequest], Awaitable[CommitResult]] = self._group.commit
        """Commit a request once, with whatever else is ready this loop turn."""

    async def commit(self, item: WorkItem, request: CommitRequest) -> list[WorkItem]:
        """Commit the outcome of ``item``, riding out a world that is unavailable;
        the items the commit leased to this worker.

        Raises:
            WorldMisconfiguredError: the world cannot be used (waiting will not help).
            Exception: a workflow task's commit that failed ``POISON_LIMIT`` times.
        """
        backoff = Backoff(cap=self._lease_seconds / 6)
        doing = f"commit {describe_work(item)}"
        poisoned = 0
        while True:
            try:
                result = await self._group.commit(request)
            except Exception as exc:
                if (fatal := is_fatal(exc)) is not None:
                    raise fatal from exc
                if not is_transient(exc):
                    poisoned += 1
                    if poisoned >= POISON_LIMIT:
                        if item.kind != "step" or request.events == ():
                            raise
                        self._complaints.failed(doing, exc, None)
                        wake = not self._capacity.stopping
                        request = poisoned_step_commit(item, request, exc, wake)
                        poisoned = -POISON_LIMIT  # the replacement gets its own tries
                        continue
                delay = backoff.next()
                self._complaints.failed(doing, exc, delay)
                await anyio.sleep(delay)
                continue
            self._complaints.succeeded(doing)
            if result.lease_lost:
                self.lease_lost(item, bool(result.events), result.lease_holder)
            return list(result.leased)

    def lease_lost(self, item: WorkItem, recorded: bool, holder: str | None) -> None:
        """Say that a result was refused; a world records it as ``StepDiscarded``
        unless an earlier try of this very commit had landed (then all is well)."""
        if recorded:
            now_held = "nobody holds it now" if holder is None else f"worker {holder} holds it now"
            log.warning(
                "worker %s: the result of %s was refused and discarded: its lease was lost"
                " (%s: it ran past its lease, or its run was cancelled)",
                self.worker_id,
                describe_work(item),
                now_held,
            )
