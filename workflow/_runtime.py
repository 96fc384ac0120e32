"""The seam between the public API and the engine: the one channel between them.

The public modules never import the engine; they know only what this module
declares, and the engine implements it. Two things cross:

* **The runtime of the code running now.** Public functions such as
  ``set_attribute`` are one-line calls to the ``Runtime`` found in a context
  variable; the engine installs a ``WorkflowInstance`` while a workflow body
  runs and a ``StepRuntime`` while a step runs (``installed``/``uninstall``).
  The client finds the worker's world through ``default_world`` too.
* **The worlds the Workers of this process serve.** A running ``Worker``
  registers its world and its ``EagerStarter`` (``serve``/``stop_serving``):
  the client then refuses a default world no worker here serves
  (``served_worlds``), and ``start`` hands the worker the first task of a run
  it can run (``eager_starter``).
* **A worker for built-in workflows.** The engine provides how to build a
  ``Worker`` (``provide_worker``); the bulk actions (``workflow._bulk``) drive
  their ``$bulk`` run with one (``in_process_worker``) without importing it.

``workflow.decorators`` and this module know each other: a step call asks the
runtime for ``call_step`` (decorators imports this module), and ``Runtime``'s
signature names ``StepDefinition`` (an import for type checking only).
"""

from __future__ import annotations

import contextvars
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from workflow.errors import NotInWorkflowError
from workflow.types import RunMetadata, StepMetadata
from worlds.types import Limit, Rate

if TYPE_CHECKING:
    from workflow._hooks import Hook
    from workflow._updates import Update
    from workflow.decorators import StepDefinition
    from worlds.protocol import World
    from worlds.types import AttributeValue, CreateRunRequest, CreateRunResult, ReuseWindow

__all__ = [
    "ChildRequest",
    "EagerStarter",
    "Runtime",
    "current",
    "current_or_none",
    "default_world",
    "eager_starter",
    "in_process_worker",
    "installed",
    "provide_worker",
    "serve",
    "served_worlds",
    "stop_serving",
    "uninstall",
]


class Runtime(ABC):
    """What workflow and step code can ask of the engine.

    A method that makes no sense in the current context (``sleep`` in a step,
    say) raises ``NotInWorkflowError`` naming what to use instead.
    """

    @property
    @abstractmethod
    def in_workflow(self) -> bool:
        """True in workflow code, False in step code."""

    @property
    def replaying(self) -> bool:
        """True while a workflow body re-executes what its log already records.

        ``workflow.logger`` is silent then. Step code never replays.
        """
        return False

    @abstractmethod
    def default_world(self) -> World | None:
        """The world client calls without ``world=`` use here, or ``None`` for none.

        A step answers its worker's world, so ``start``/``get_run`` in a step
        reach the world that runs it; workflow code answers ``None`` (it does no
        I/O, and the client falls back to the configured world).
        """

    @abstractmethod
    def call_step(
        self, step: StepDefinition[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Awaitable[Any]:
        """Record and schedule a step from workflow code; return its awaitable."""

    @abstractmethod
    async def set_attribute(
        self, key: str, value: Any, unique: bool, window: ReuseWindow | None = None
    ) -> AttributeValue:
        """Set an attribute; see ``workflow.set_attribute`` (``window``: its reuse window)."""

    @abstractmethod
    async def get_attribute(self, key: str) -> AttributeValue:
        """Read an attribute; see ``workflow.get_attribute``."""

    @abstractmethod
    async def list_attributes(self) -> dict[str, AttributeValue]:
        """All attributes in scope; see ``workflow.list_attributes``."""

    @abstractmethod
    async def sleep(self, seconds: float) -> None:
        """A durable timer; see ``workflow.sleep``."""

    async def sleep_until(self, when: datetime) -> None:
        """A durable timer until the aware ``when``; see ``workflow.sleep_until``."""
        raise NotInWorkflowError("sleep_until() works in workflow code, not in steps")

    @abstractmethod
    def create_hook(self, token: str | None, attributes: dict[str, Any] | None) -> Hook:
        """A hook resumed from outside; see ``workflow.create_hook``."""

    @abstractmethod
    def now(self) -> datetime:
        """Replay-safe current time."""

    @abstractmethod
    def random(self) -> float:
        """Replay-safe random float in [0, 1)."""

    @abstractmethod
    def uuid4(self) -> UUID:
        """Replay-safe random UUID."""

    @abstractmethod
    def run_metadata(self) -> RunMetadata:
        """Facts about the current run."""

    @abstractmethod
    def step_metadata(self) -> StepMetadata:
        """Facts about the current step attempt."""

    @abstractmethod
    def continue_as_new(self, args: tuple[Any, ...]) -> None:
        """Close this run and start a fresh one; see ``workflow.continue_as_new``."""

    async def start_child(self, request: ChildRequest) -> str:
        """Start a child run from workflow code (durable); its run id. See ``workflow.start``."""
        raise NotInWorkflowError(
            "a child run is started from workflow code; in a step, start() starts a plain run"
        )

    async def child_result(self, run_id: str, fn: Any, timeout: float | None) -> Any:
        """Wait durably for child run ``run_id`` in workflow code; see ``Run.result``."""
        raise NotInWorkflowError("only workflow code waits durably for a child run")

    @abstractmethod
    async def write_stream(self, name: str, data: bytes) -> None:
        """Append a chunk to this run's stream ``name``; see ``workflow.write_stream``."""

    async def close_stream(self, name: str) -> None:
        """Close this run's stream ``name``; see ``workflow.close_stream``."""
        raise NotInWorkflowError("close_stream() works in workflow code, not in steps")

    def patched(self, name: str) -> bool:
        """Whether this run takes the new branch of patch ``name``; see ``workflow.patched``."""
        raise NotInWorkflowError("patched() works in workflow code, not in steps")

    def hold(
        self, key: str, value: AttributeValue, limit: int, priority: int = 0
    ) -> AbstractAsyncContextManager[None]:
        """A durable semaphore block of workflow code; see ``workflow.hold``."""
        raise NotInWorkflowError(
            "hold() works in workflow code: a step cannot wait durably; hold the slot in "
            "the workflow around the step call"
        )

    async def rate_limit(self, key: str, value: AttributeValue, limit: int, per: float) -> None:
        """Wait durably for a token of a rate-limited pair; see ``workflow.rate_limit``."""
        raise NotInWorkflowError(
            "rate_limit() works in workflow code: a step cannot wait durably; take the "
            "token in the workflow before the step call"
        )

    def receive_updates(self, name: str) -> AsyncIterator[Update]:
        """The updates sent to this run under ``name``; see ``workflow.receive_updates``."""
        raise NotInWorkflowError(
            "receive_updates() works in workflow code: a step cannot wait durably"
        )


@dataclass(frozen=True, slots=True)
class ChildRequest:
    """A checked child start, as ``workflow.start`` hands it to the runtime."""

    workflow: str
    args: bytes
    attributes: dict[str, AttributeValue]
    unique: frozenset[str]
    on_parent_close: str
    timeout_seconds: float | None
    limits: dict[str, Limit] = field(default_factory=dict)
    """Each ``Limited`` key's limit: the child takes a slot of its pair (or waits)."""
    rates: dict[str, Rate] = field(default_factory=dict)
    """Each ``RateLimited`` key's rate: the child takes a token of its pair."""
    delay_seconds: float | None = None
    """``delay=``: the child starts that long after the parent's task started it."""
    priority: int = 0


_current: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar(
    "workflow_runtime", default=None
)


def current() -> Runtime:
    """The active runtime; ``NotInWorkflowError`` outside workflow and step code."""
    runtime = _current.get()
    if runtime is None:
        raise NotInWorkflowError(
            "this call only works inside a @workflow or @step function run by a Worker"
        )
    return runtime


def current_or_none() -> Runtime | None:
    """The active runtime, or ``None`` outside workflow and step code."""
    return _current.get()


def default_world() -> World | None:
    """The active runtime's ``default_world()``; ``None`` outside workflow and step code."""
    runtime = _current.get()
    return None if runtime is None else runtime.default_world()


def installed(runtime: Runtime) -> contextvars.Token[Runtime | None]:
    """Make ``runtime`` current in this context; returns a token to reset it."""
    return _current.set(runtime)


def uninstall(token: contextvars.Token[Runtime | None]) -> None:
    """Undo ``installed``."""
    _current.reset(token)


# ------------------------------------------------------------------ served worlds


class EagerStarter(Protocol):
    """A Worker in this process that takes the first workflow task of the runs
    started here that it can run, leased to it as the run is created."""

    def reserve(self, world: World, workflow: str) -> bool:
        """Hold a slot for a new run of ``workflow`` in ``world``; False if it cannot."""
        ...

    async def first_task(self, request: CreateRunRequest) -> CreateRunRequest:
        """``request`` (after ``reserve``) with ``lease_to`` set, and with the run's
        first workflow task run ahead (``first``) where it can be."""
        ...

    def adopt(self, request: CreateRunRequest, created: CreateRunResult | None) -> None:
        """Take over what creating ``request`` leased to this worker (``created``
        None: it raised); the slot ``reserve`` held is free again."""
        ...


# The worlds that Workers running in this process serve (once per Worker), and
# the Workers' starters.
_served: list[World] = []
_starters: list[EagerStarter] = []


def serve(world: World, starter: EagerStarter) -> None:
    """Note that a Worker in this process serves ``world`` (until ``stop_serving``);
    ``start`` hands ``starter`` the first task of runs it can run."""
    _served.append(world)
    _starters.append(starter)


def stop_serving(world: World, starter: EagerStarter) -> None:
    """Undo one ``serve(world, starter)``."""
    if world in _served:
        _served.remove(world)
    if starter in _starters:
        _starters.remove(starter)


def served_worlds() -> list[World]:
    """The worlds the Workers in this process serve now, oldest first."""
    return list(_served)


def eager_starter(world: World, workflow: str) -> EagerStarter | None:
    """A Worker here that reserved a slot for a new run of ``workflow`` in ``world``."""
    for starter in _starters:
        if starter.reserve(world, workflow):
            return starter
    return None


# ------------------------------------------------------------------ in-process workers


class WorkerFactory(Protocol):
    """How to build a ``Worker`` (the engine's class): ``Worker(world, functions, ...)``."""

    def __call__(
        self, world: World, functions: Sequence[Any], *, lease_seconds: float = ...
    ) -> AbstractAsyncContextManager[Any]: ...


_worker_factory: list[WorkerFactory] = []


def provide_worker(factory: WorkerFactory) -> None:
    """Record how to build a Worker (the engine calls it once, on import)."""
    _worker_factory[:] = [factory]


def in_process_worker(
    world: World, functions: Sequence[Any], *, lease_seconds: float
) -> AbstractAsyncContextManager[Any]:
    """A Worker of this process for ``functions`` on ``world``, to enter with ``async with``."""
    if not _worker_factory:
        raise RuntimeError("the workflow engine is not loaded (import workflow first)")
    return _worker_factory[0](world, functions, lease_seconds=lease_seconds)
