"""A blocking client for synchronous code (Django, Flask, scripts).

::

    from workflow.sync import SyncClient

    client = SyncClient("sqlite:///app.db")        # once, at start-up; thread-safe
    run = client.start(checkout, "o-1", 1999, attributes={"order": Unique("o-1")})
    print(run.result(timeout=30))
    client.close()                                  # or: with SyncClient(...) as client:

The client runs an event loop in a background thread of its own and forwards
each call to the async client (``workflow.start``, ``find_run``, ...), so the
caller never manages a loop. Every world connection belongs to that loop. Use
it from any number of threads; do not call it from inside an event loop (use
the async client there).
"""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Self, TypeVar

import anyio
import anyio.from_thread

import worlds
from workflow.client import Run, find_run, get_run, list_runs, resume_hook, start
from workflow.decorators import WorkflowDefinition
from worlds.protocol import World
from worlds.types import AttributeValue, Claim, EventKind, RunStatus

__all__ = ["SyncClient", "SyncRun", "SyncRunList"]

R = TypeVar("R")
T = TypeVar("T")


class SyncRun(Generic[R]):
    """A blocking handle to one run; each method asks the world and waits for the answer."""

    def __init__(self, client: SyncClient, run: Run[R]) -> None:
        self._client = client
        self.run = run
        """The async handle, for code that has an event loop."""

    @property
    def id(self) -> str:
        """The run id."""
        return self.run.id

    def __repr__(self) -> str:
        return f"SyncRun({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SyncRun) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def status(self) -> RunStatus:
        """Where the run is now."""
        return self._client._call(self.run.status)

    def result(self, timeout: float | None = None) -> R:
        """Block until the run closes and return its result (see ``Run.result``).

        Raises:
            RunFailedError / RunCancelledError: the run failed or was cancelled.
            TimeoutError: ``timeout`` seconds passed first.
        """
        return self._client._call(self.run.result, timeout)

    def attributes(self) -> dict[str, AttributeValue]:
        """The run's attributes."""
        return self._client._call(self.run.attributes)

    def claims(self) -> list[Claim]:
        """The unique pairs the run holds (see ``Run.claims``)."""
        return self._client._call(self.run.claims)

    def events(self) -> list[EventKind]:
        """The run's event log."""
        return self._client._call(self.run.events)

    def cancel(self, reason: str | None = None, *, grace: float | None = 30.0) -> None:
        """Cancel the run (see ``Run.cancel``)."""
        self._client._call(lambda: self.run.cancel(reason, grace=grace))


@dataclass(frozen=True, slots=True)
class SyncRunList:
    """One page of ``SyncClient.list_runs``; pass ``next_cursor`` back for more."""

    runs: list[SyncRun[Any]]
    next_cursor: str | None

    def __iter__(self) -> Iterator[SyncRun[Any]]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)


class SyncClient:
    """The client API as blocking calls, on an event loop in a background thread.

    Args:
        world: a world URL (opened, and closed by ``close``), a world object
            (not closed by ``close``), or None for the configured world
            (``$WORKFLOW_WORLD``, else the embedded SQLite file).
    """

    def __init__(self, world: str | World | None = None) -> None:
        self._owns_world = isinstance(world, str)
        self._world: World | None = worlds.open(world) if isinstance(world, str) else world
        self._portal_context: AbstractContextManager[anyio.from_thread.BlockingPortal] = (
            anyio.from_thread.start_blocking_portal()
        )
        self._portal: anyio.from_thread.BlockingPortal | None = self._portal_context.__enter__()
        self._lock = threading.Lock()

    @property
    def world(self) -> World | None:
        """The world given (or opened from the URL given); None means the configured one."""
        return self._world

    def _call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        portal = self._portal
        if portal is None:
            raise RuntimeError("this SyncClient is closed; make a new one")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # plain synchronous code: the case this client is for
        else:
            raise RuntimeError(
                "SyncClient blocks, and this thread runs an event loop it would stall: "
                "await the async client (workflow.start, Run.result, ...) here instead"
            )
        result: T = portal.call(fn, *args)
        return result

    def start(
        self,
        fn: WorkflowDefinition[..., R],
        *args: Any,
        attributes: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        timeout: float | None = None,
    ) -> SyncRun[R]:
        """``workflow.start`` as a blocking call; see there for the options and errors."""

        async def call() -> Run[R]:
            return await start(
                fn,
                *args,
                attributes=attributes,
                idempotency_key=idempotency_key,
                timeout=timeout,
                world=self._world,
            )

        return SyncRun(self, self._call(call))

    def get_run(self, run_id: str) -> SyncRun[Any]:
        """A handle to run ``run_id`` (no I/O until a method is called)."""
        return SyncRun(self, get_run(run_id, world=self._world))

    def find_run(self, key: str, value: AttributeValue) -> SyncRun[Any] | None:
        """The run holding the unique pair (``key``, ``value``), or None."""

        async def call() -> Run[Any] | None:
            return await find_run(key, value, world=self._world)

        found = self._call(call)
        return None if found is None else SyncRun(self, found)

    def list_runs(
        self,
        *,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        status: RunStatus | str | list[RunStatus | str] | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
        query: str | None = None,
    ) -> SyncRunList:
        """``workflow.list_runs`` as a blocking call: one page, newest first."""

        async def call() -> SyncRunList:
            page = await list_runs(
                workflow=workflow,
                status=status,
                attributes=attributes,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                cursor=cursor,
                query=query,
                world=self._world,
            )
            return SyncRunList([SyncRun(self, run) for run in page], page.next_cursor)

        return self._call(call)

    def resume_hook(
        self, token: str, payload: Any = None, *, resume_id: str | None = None
    ) -> SyncRun[Any]:
        """``workflow.resume_hook`` as a blocking call; returns the run that holds ``token``."""

        async def call() -> Run[Any]:
            return await resume_hook(token, payload, resume_id=resume_id, world=self._world)

        return SyncRun(self, self._call(call))

    def close(self) -> None:
        """Stop the background loop (and close the world opened from a URL). Idempotent."""
        with self._lock:
            portal, self._portal = self._portal, None
        if portal is None:
            return
        try:
            if self._owns_world and self._world is not None:
                portal.call(self._world.close)
        finally:
            self._portal_context.__exit__(None, None, None)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.close()
