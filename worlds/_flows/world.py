"""The world operations that are one flow in one write transaction, written once.

Private to ``worlds``. ``FlowWorld`` is the base of every backend's world: each
of its entry points checks its input at the boundary (nothing is written when
it is refused) and runs one flow of this package through the backend's
``_run_flow``, which is all a backend supplies for them: its write transaction
over its rows (a memory journal, SQLite's writer thread, a PostgreSQL
transaction with its retries). A backend overrides an entry point only where
its storage answers faster than the flow (PostgreSQL's server-side functions).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from worlds import types
from worlds._flows import (
    cancel,
    commit,
    create,
    hooks,
    key_limits,
    liveness,
    prune,
    release,
    reopen,
    slot_history,
    starts,
    streams,
    updates,
)
from worlds._flows.rows import WorldRows
from worlds._lifecycle import ClosesOnExit

__all__ = ["FlowWorld"]

R = TypeVar("R", bound=WorldRows)
T = TypeVar("T")


class FlowWorld(ClosesOnExit, abc.ABC, Generic[R]):
    """A world whose writes are the flows, over the rows ``R`` of its backend."""

    @abc.abstractmethod
    async def _run_flow(self, flow: Callable[[R], Coroutine[Any, Any, T]]) -> T:
        """Run ``flow`` as one write transaction of this world (refused once it is
        closed): all of it or nothing, its signals delivered after it commits, a
        flow's ``Rollback`` answering its result."""

    async def _read_flow(self, flow: Callable[[R], Coroutine[Any, Any, T]]) -> T:
        """Run ``flow``, which only reads; as a write transaction unless the backend
        has a cheaper way to read consistently (SQLite reads beside its writer)."""
        return await self._run_flow(flow)

    # ------------------------------------------------------------------ runs

    async def create_run(self, request: types.CreateRunRequest) -> types.CreateRunResult:
        """See ``World.create_run`` and ``StartPolicy`` (a takeover of the policy's key)."""
        create.check(request)
        return await self._run_flow(lambda rows: create.create_run(rows, request))

    async def commit(self, request: types.CommitRequest) -> types.CommitResult:
        """See ``World.commit``."""
        return await self._run_flow(lambda rows: commit.commit(rows, request))

    async def commit_many(
        self, requests: Sequence[types.CommitRequest]
    ) -> list[types.CommitResult | Exception]:
        """See ``World.commit_many``: one transaction (one fsync where there is a
        disk) for the batch, each request in a savepoint of its own, so a failing
        one leaves no trace."""
        batch = commit.check_batch(requests)
        return await self._run_flow(lambda rows: commit.commit_each(rows, batch))

    async def cancel_run(self, run_id: str, reason: str | None) -> types.RunRecord | None:
        """See ``World.cancel_run``."""
        return await self._run_flow(lambda rows: cancel.cancel_run(rows, run_id, reason))

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> types.RunRecord | None:
        """See ``World.request_cancel``."""
        return await self._run_flow(
            lambda rows: cancel.request_cancel(rows, run_id, reason, grace_seconds)
        )

    async def cancel_listed(
        self, run_ids: Sequence[str], reason: str | None, grace_seconds: float | None
    ) -> dict[str, types.RunStatus | None]:
        """See ``World.cancel_listed``."""
        return await self._run_flow(
            lambda rows: cancel.cancel_listed(rows, run_ids, reason, grace_seconds)
        )

    async def reopen_run(self, run_id: str, by: str) -> types.RunRecord | None:
        """See ``World.reopen_run``."""
        return await self._run_flow(lambda rows: reopen.reopen_run(rows, run_id, by))

    async def reopen_listed(
        self, run_ids: Sequence[str], by: str
    ) -> dict[str, types.ListedReopen | None]:
        """See ``World.reopen_listed``."""
        return await self._run_flow(lambda rows: reopen.reopen_listed(rows, run_ids, by))

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> types.RunRecord | None:
        """See ``World.fork_run``."""
        return await self._run_flow(
            lambda rows: reopen.fork_run(rows, source_run_id, run_id, from_step, by)
        )

    async def move_start(self, run_id: str, delay: float | None) -> types.RunRecord | None:
        """See ``World.move_start``."""
        return await self._run_flow(lambda rows: starts.move_start(rows, run_id, delay))

    # ------------------------------------------------------------------ hooks, updates

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``."""
        return await self._run_flow(lambda rows: hooks.resume_hook(rows, token, payload, resume_id))

    async def start_or_resume_hook(
        self, request: types.CreateRunRequest, delivery: types.HookDelivery
    ) -> types.HookStartResult:
        """See ``World.start_or_resume_hook``."""
        hooks.check_start_or_resume(request)
        return await self._run_flow(
            lambda rows: hooks.start_or_resume_hook(rows, request, delivery)
        )

    async def send_update(self, run_id: str, delivery: types.UpdateDelivery) -> types.UpdateOutcome:
        """See ``World.send_update``."""
        updates.check_delivery(delivery)
        return await self._run_flow(lambda rows: updates.send_update(rows, run_id, delivery))

    async def update_outcome(self, run_id: str, update_id: str) -> types.UpdateOutcome | None:
        """See ``World.update_outcome``."""
        return await self._read_flow(lambda rows: updates.update_outcome(rows, run_id, update_id))

    async def update_with_start(
        self, request: types.CreateRunRequest, delivery: types.UpdateDelivery
    ) -> types.UpdateStartResult:
        """See ``World.update_with_start``."""
        updates.check_update_with_start(request, delivery)
        return await self._run_flow(lambda rows: updates.update_with_start(rows, request, delivery))

    # ------------------------------------------------------------------ streams, keys

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``."""
        streams.check_name(name)
        return await self._run_flow(lambda rows: streams.append_stream(rows, run_id, name, chunks))

    async def set_key_limit(
        self,
        key: str,
        limit: int | None,
        weights: Mapping[Any, float] | None = None,
    ) -> types.KeyLimit | None:
        """See ``World.set_key_limit``."""
        stored = key_limits.check(key, limit, weights)
        return await self._run_flow(lambda rows: key_limits.set_key_limit(rows, key, stored))

    async def release_claim(
        self, key: str, value: types.AttributeValue
    ) -> types.Claim | types.ClaimConflict | None:
        """See ``World.release_claim``."""
        return await self._run_flow(lambda rows: release.release_claim(rows, key, value))

    # ------------------------------------------------------------------ liveness

    async def register_worker(self, worker: types.WorkerInfo) -> types.WorkerRecord:
        """See ``World.register_worker``."""
        return await self._run_flow(lambda rows: liveness.register(rows, worker))

    async def heartbeat(self, worker_id: str, in_flight: int) -> bool:
        """See ``World.heartbeat``."""
        return await self._run_flow(lambda rows: liveness.heartbeat(rows, worker_id, in_flight))

    async def unregister_worker(self, worker_id: str) -> None:
        """See ``World.unregister_worker``."""
        await self._run_flow(lambda rows: liveness.unregister(rows, worker_id))

    # ------------------------------------------------------------------ retention

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_runs``; runs another transaction holds wait for a later
        prune."""
        if limit <= 0:
            return []
        return await self._run_flow(
            lambda rows: prune.prune_runs(rows, closed_before, limit, release_claims=release_claims)
        )

    async def prune_expired(
        self,
        keep: Mapping[types.RunStatus, float],
        limit: int = 1000,
        *,
        release_claims: bool = False,
    ) -> list[str]:
        """See ``World.prune_expired``; runs another transaction holds wait for a
        later one."""
        return await self._run_flow(
            lambda rows: prune.prune_expired(rows, keep, limit, release_claims=release_claims)
        )

    async def prune_listed(
        self, run_ids: Sequence[str], *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_listed``."""
        return await self._run_flow(
            lambda rows: prune.prune_listed(rows, run_ids, release_claims=release_claims)
        )

    async def prune_slot_history(
        self, keep: float = types.SLOT_HISTORY_KEEP, limit: int = 1000
    ) -> int:
        """See ``World.prune_slot_history``."""
        return await self._run_flow(lambda rows: slot_history.prune(rows, keep, limit))

    async def pin_run(self, run_id: str, pinned: bool) -> types.RunRecord | None:
        """See ``World.pin_run``."""
        return await self._run_flow(lambda rows: prune.pin_run(rows, run_id, pinned))
