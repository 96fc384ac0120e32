"""Start runs and look at them from outside a workflow: ``start``, ``get_run``, ``Run``.

Every function takes ``world=None``: a world from ``worlds.open(url)``, or by
default the one in force (the worker's, inside a step; else ``$WORKFLOW_WORLD``;
else the embedded SQLite file).
"""

from __future__ import annotations

import asyncio
import getpass
import math
import os
import socket
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeVar

import anyio

import worlds
from workflow import _observe, _runtime
from workflow._attributes import (
    IDEMPOTENCY_KEY,
    check_pair,
    check_text,
    check_token,
    split_start_attributes,
)
from workflow._codec import decode_result, encode_call, encode_result
from workflow.decorators import WorkflowDefinition
from workflow.errors import (
    AttributeConflictError,
    HookNotFoundError,
    RunCancelledError,
    RunFailedError,
    RunNotFoundError,
)
from workflow.query import parse as parse_query
from worlds.protocol import World, run_topic
from worlds.query import AttrRef, Compare, Expr
from worlds.semantics import ON_PARENT_CLOSE, PARENT_KEY, check_stream_name, new_run_id
from worlds.types import (
    AttributeValue,
    Claim,
    CreateRunRequest,
    CreateRunResult,
    EventKind,
    HookRecord,
    RunCancelled,
    RunContinued,
    RunQuery,
    RunRecord,
    RunStatus,
    Slot,
)

__all__ = [
    "Run",
    "RunList",
    "find_run",
    "get_run",
    "list_hooks",
    "list_runs",
    "prune_runs",
    "resolve_world",
    "resume_hook",
    "start",
]

R = TypeVar("R")

_STREAM_PAGE = 1000
"""Chunks ``Run.stream`` reads per round trip."""

# The worlds opened implicitly, per event loop: a world's connections belong to
# the loop that made them, and they go away with it (weakly keyed, so that a
# loop that ended does not keep them, nor a later loop with the same id reuse them).
_opened: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, World]] = (
    weakref.WeakKeyDictionary()
)
_opened_outside_loops: dict[str, World] = {}
# The worlds that Workers running in this process serve, once per Worker.
_served: list[World] = []


def resolve_world(world: World | None) -> World:
    """``world``, or the world in force: the worker's, else the configured URL's.

    Raises:
        ValueError: ``world`` is None and the configured world is not one that
            the Workers running in this process serve: runs started there would
            wait for a worker that never comes. Pass ``world=`` explicitly.
    """
    if world is not None:
        return world
    in_worker = _runtime.default_world()
    if in_worker is not None:
        return in_worker
    url = worlds.url_from_env()
    try:
        opened = _opened.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        opened = _opened_outside_loops
    if url not in opened:
        opened[url] = worlds.open(url)
    default = opened[url]
    served = list(_served)
    if served and all(_storage(w) != _storage(default) for w in served):
        source = f"${worlds.ENV_VAR}" if os.environ.get(worlds.ENV_VAR) else "the built-in default"
        raise ValueError(
            f"no world= was given, so the default world {url} ({source}) was chosen, but "
            f"the Worker in this process serves {served[0]!r}: a run there would wait for a "
            "worker that never comes. Pass the world explicitly: "
            "start(fn, ..., world=world), get_run(run_id, world=world), ..."
        )
    return default


def _storage(world: World) -> object:
    """What tells two world objects over the same storage apart from others."""
    path = getattr(world, "path", None)
    if isinstance(path, str) and path != ":memory:":
        return ("file", path)
    url = getattr(world, "url", None)
    if isinstance(url, str) and path is None and not url.lower().startswith("memory:"):
        return ("url", url)
    return world  # in-memory storage: only the object itself


class EagerStarter(Protocol):
    """A Worker in this process that takes the first workflow task of the runs
    started here that it can run, leased to it as the run is created."""

    worker_id: str
    lease_seconds: float

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


_starters: list[EagerStarter] = []


def serve_world(world: World, starter: EagerStarter | None = None) -> None:
    """Note that a Worker in this process serves ``world`` (until ``stop_serving_world``);
    with ``starter``, ``start`` hands it the first task of runs it can run."""
    _served.append(world)
    if starter is not None:
        _starters.append(starter)


def stop_serving_world(world: World, starter: EagerStarter | None = None) -> None:
    """Undo one ``serve_world(world, starter)``."""
    if world in _served:
        _served.remove(world)
    if starter in _starters:
        _starters.remove(starter)


def _eager_starter(world: World, workflow: str) -> EagerStarter | None:
    """A Worker here that reserved a slot for a new run of ``workflow`` in ``world``."""
    for starter in _starters:
        if starter.reserve(world, workflow):
            return starter
    return None


class Run(Generic[R]):
    """A handle to one run. Creating one does no I/O; each method asks the world."""

    def __init__(
        self,
        run_id: str,
        *,
        world: World | None = None,
        workflow: WorkflowDefinition[..., R] | None = None,
        record: RunRecord | None = None,
    ) -> None:
        self._id = run_id
        self._world = world
        self._workflow = workflow
        self.record = record
        """The run as last read by ``list_runs``/``find_run``, if any (may be stale)."""

    @property
    def id(self) -> str:
        """The run id."""
        return self._id

    @property
    def world(self) -> World:
        """The world this run lives in."""
        return resolve_world(self._world)

    def __repr__(self) -> str:
        return f"Run({self._id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self._id)

    async def _record(self) -> RunRecord:
        record = await self.world.get_run(self._id)
        if record is None:
            raise RunNotFoundError(self._id)
        self.record = record
        return record

    async def status(self) -> RunStatus:
        """Where the run is now."""
        return (await self._record()).status

    async def attributes(self) -> dict[str, AttributeValue]:
        """The run's attributes."""
        return dict((await self._record()).attributes)

    async def events(self) -> list[EventKind]:
        """The run's event log, in order."""
        await self._record()
        return await self.world.read_events(self._id)

    async def slots(self) -> list[Slot]:
        """The limited pairs this run holds a slot of (``slot.holding``) or waits in,
        by key then value (see ``Limited``)."""
        return await self.world.run_slots(self._id)

    async def claims(self) -> list[Claim]:
        """The unique pairs this run and its steps hold now, by key then value.

        Every pair ``find_run`` resolves to this run is here. A step's claim
        (``set_attribute(..., unique=True)`` in a step) has ``claim.step`` set;
        the run's own claims have ``claim.step`` None. A claim's ``generation``
        is a fencing token: it grows on every takeover, so an external system
        that remembers the highest one it has seen can refuse a superseded run.
        A claim the run lost is absent. ``claim(key)`` picks one out.
        """
        return await self.world.run_claims(self._id)

    async def claim(self, key: str) -> Claim | None:
        """The run's own claim on ``key`` (not a step's), or ``None`` if it holds none.

        The fencing token a step passes on: ``(await run.claim("order")).generation``.
        """
        own = [c for c in await self.world.run_claims(self._id) if c.key == key and c.step is None]
        return own[-1] if own else None

    async def parent(self) -> Run[Any] | None:
        """The run that started this one as a child run (``start`` in a workflow), or None."""
        parent = (await self._record()).attributes.get(PARENT_KEY)
        return Run(parent, world=self._world) if isinstance(parent, str) else None

    async def children(self) -> list[Run[Any]]:
        """The child runs this run started, oldest first (records as ``list_runs`` read them)."""
        found: list[Run[Any]] = []
        cursor = None
        where = Compare(AttrRef(PARENT_KEY), "=", self._id)
        while True:
            page = await self.world.list_runs(RunQuery(where=where, limit=1000, cursor=cursor))
            found += [Run(r.id, world=self._world, record=r) for r in page.runs]
            if (cursor := page.next_cursor) is None:
                return found[::-1]

    async def stream(self, name: str, start: int = 0, *, follow: bool = True) -> AsyncIterator[Any]:
        """The chunks of the run's stream ``name`` (``write_stream``), from offset ``start``.

        Offsets count chunks from 0 without gaps, so a reader that got ``n`` chunks
        and reconnects with ``start=n`` misses nothing and sees nothing twice. With
        ``follow`` (the default) it waits for new chunks until the run closes, then
        ends after the last one: a world takes no chunk once its run closed.
        """
        check_stream_name(name)
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be an offset >= 0, got {start!r}")
        offset = start
        closed = False
        while True:
            chunks = await self.world.read_stream(self._id, name, offset, _STREAM_PAGE)
            for chunk in chunks:
                yield decode_result(chunk.data, None)
                offset = chunk.offset + 1
            if len(chunks) == _STREAM_PAGE:
                continue
            if not chunks:
                if closed or not follow:
                    return
                # read once more after seeing the run closed: that read gets the last chunks
                closed = (await self._record()).status.is_closed
                if closed:
                    continue
            elif not follow:
                continue
            await self.world.wait(run_topic(self._id), 1.0)

    async def retry(self, *, by: str | None = None) -> None:
        """Reopen this failed or cancelled run: same id, its recorded steps kept.

        The steps that failed, or never finished, run again (with a fresh retry
        budget) and the body replays past everything recorded; the run keeps the
        unique claims it still holds. The log records ``RunReopened`` naming
        ``by`` (default: this user and host). Hooks the run had are not held
        again until it creates them anew.

        Raises:
            RunNotFoundError: no such run.
            ValueError: the run is not failed or cancelled; nothing changed.
        """
        who = _caller() if by is None else check_text("by", by)
        before = (await self._record()).status
        record = None
        if before in (RunStatus.FAILED, RunStatus.CANCELLED):
            record = await self.world.reopen_run(self._id, who)
            if record is None:
                raise RunNotFoundError(self._id)
            self.record = record
        if record is None or record.status.is_closed:
            now = before if record is None else record.status
            raise ValueError(
                f"run {self._id} is {now.value}: only a failed or cancelled run can be retried"
            )

    async def fork(self, from_step: int, *, by: str | None = None) -> Run[R]:
        """A new run that replays this run's log up to its step ``from_step`` and runs
        that step and the rest anew (this run is left as it is).

        The fork starts with the same arguments and start attributes, minus the
        parent link; it holds none of this run's unique claims. Its log starts
        with the copied events, then ``RunForked`` naming this run, the step and
        ``by`` (default: this user and host).

        Raises:
            RunNotFoundError: no such run.
            ValueError: this run has no step ``from_step``.
        """
        if isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 1:
            raise ValueError(f"from_step must be a step number >= 1, got {from_step!r}")
        who = _caller() if by is None else check_text("by", by)
        run_id = new_run_id()
        record = await self.world.fork_run(self._id, run_id, from_step, who)
        if record is None:
            raise RunNotFoundError(self._id)
        return Run(run_id, world=self._world, workflow=self._workflow, record=record)

    async def cancel(self, reason: str | None = None, *, grace: float | None = 30.0) -> None:
        """Cancel the run, recording ``reason``.

        Queued steps never start and steps in flight are told to stop (their
        late results are discarded). The workflow body gets ``CancelledError``
        where it waits, once: it may catch it and run cleanup steps for up to
        ``grace`` seconds, after which the run is closed as cancelled anyway.
        ``grace=None`` closes the run at once, with no cleanup (Temporal's
        terminate). Cancelling a closed run does nothing.
        """
        if reason is not None:
            encode_result(reason, "the cancel reason")  # TypeError if no world can store it
        if grace is None:
            found = await self.world.cancel_run(self._id, reason)
        else:
            if grace < 0:
                raise ValueError(f"grace must be >= 0 seconds, got {grace}")
            found = await self.world.request_cancel(self._id, reason, grace)
        if found is None:
            raise RunNotFoundError(self._id)

    async def result(self, timeout: float | None = None) -> R:
        """Wait for the run to close and return its result.

        A run that continued as new gives the result of the last run of its chain.
        In workflow code, on a child run this workflow started, the wait is
        durable: the parent holds no worker until the child closes (a
        ``timeout`` is a durable timer there).

        Raises:
            RunFailedError: the run failed.
            RunCancelledError: the run was cancelled.
            TimeoutError: ``timeout`` seconds passed first.
        """
        runtime = _runtime.current_or_none()
        if runtime is not None and runtime.in_workflow:
            fn = self._workflow.fn if self._workflow is not None else None
            child: R = await runtime.child_result(self._id, fn, timeout)
            return child
        deadline = math.inf if timeout is None else anyio.current_time() + timeout
        current: Run[R] = self
        while True:
            record = await current._record()
            if record.status is RunStatus.CONTINUED:
                current = await current._successor(record)
                continue
            if record.status.is_closed:
                return await current._outcome(record)
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise TimeoutError(f"run {current.id} did not finish within {timeout} s")
            await current.world.wait(run_topic(current.id), min(remaining, 1.0))

    async def _successor(self, record: RunRecord) -> Run[R]:
        last = (await self.world.read_events(self._id, after_seq=record.last_seq - 1))[-1]
        assert isinstance(last, RunContinued)
        return Run(last.next_run_id, world=self._world, workflow=self._workflow)

    async def _outcome(self, record: RunRecord) -> R:
        if record.status is RunStatus.COMPLETED:
            assert record.result is not None
            fn = self._workflow.fn if self._workflow is not None else None
            value: R = decode_result(record.result, fn)
            return value
        if record.status is RunStatus.FAILED:
            assert record.error is not None
            raise RunFailedError(self._id, record.error.type, record.error.message)
        reason = None
        for event in reversed(await self.world.read_events(self._id)):
            if isinstance(event, RunCancelled):
                reason = event.reason
                break
        raise RunCancelledError(self._id, reason)


async def start(
    fn: WorkflowDefinition[..., R],
    *args: Any,
    attributes: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
    timeout: float | timedelta | None = None,
    delay: float | timedelta | None = None,
    on_parent_close: str = "cancel",
    world: World | None = None,
) -> Run[R]:
    """Create a run of workflow ``fn`` with ``args``; a worker will execute it.

    In workflow code this starts a *child run*, durably: the start is recorded
    in the parent's log (replay answers it from there and never starts the
    child twice), the child's ``get_run_metadata().parent_run_id`` names the
    parent, and ``await child.result()`` waits without holding a worker. A
    unique conflict raises ``AttributeConflictError`` in the parent, recorded
    too. ``on_parent_close`` says what happens to a child still open when the
    parent fails, is cancelled or continues as new: ``"cancel"`` (the default)
    cancels it in the same world transaction, ``"abandon"`` leaves it running.
    It has no effect outside workflow code.

    Every ``Unique`` value in ``attributes`` is claimed in the same atomic
    operation that creates the run, and every ``Limited`` value takes a slot of
    its pair (or, when the pair is full, the run waits, pending, until one
    frees; see ``Limited``). With ``delay``, the run stays pending that long
    before a worker starts it (a run that waits for a slot starts when it gets
    one). With ``idempotency_key``, a second start with
    the same key returns the first run instead of creating one. With
    ``timeout``, a run still open that long after its start fails with a
    ``TimeoutError`` (a durable timer in the world enforces it); a deadline
    past 9000-01-01 (``math.inf``, say) is clamped to that date, like timers.

    Raises:
        AttributeConflictError: a unique pair is held by another run, or a
            ``Limited(..., on_full="fail")`` pair is full; nothing was created.
        TypeError / ValueError: bad arguments or attributes; nothing was written.
    """
    if not isinstance(fn, WorkflowDefinition):
        raise TypeError(f"start() needs a @workflow function, got {fn!r}")
    if on_parent_close not in ON_PARENT_CLOSE:
        raise ValueError(
            f"on_parent_close must be one of {list(ON_PARENT_CLOSE)}, got {on_parent_close!r}"
        )
    runtime = _runtime.current_or_none()
    if runtime is not None and runtime.in_workflow:
        values, unique, limits, windows = split_start_attributes(attributes)
        if limits or windows or delay is not None:
            raise ValueError(
                "a child run takes no Limited value, reuse window or delay= yet; "
                "start such a run from a step, or outside the workflow"
            )
        return await _start_child(
            runtime,
            fn,
            encode_call(args),
            values,
            unique,
            idempotency_key,
            timeout,
            on_parent_close,
            world,
        )
    report = _observe.StartReport()
    with _observe.starting(fn.name, attributes or {}, report) as headers:
        try:
            run = await _create(
                fn, args, attributes, idempotency_key, timeout, delay, world, headers
            )
        except BaseException as exc:
            report.error = exc
            raise
        report.run_id = run.id
        return run


async def _create(
    fn: WorkflowDefinition[..., R],
    args: tuple[Any, ...],
    attributes: Mapping[str, Any] | None,
    idempotency_key: str | None,
    timeout: float | timedelta | None,
    delay: float | timedelta | None,
    world: World | None,
    headers: dict[str, str],
) -> Run[R]:
    payload = encode_call(args, headers=headers)
    values, unique, limits, windows = split_start_attributes(attributes)
    start_at = None if delay is None else _later("delay", delay, allow_zero=True)
    if idempotency_key is not None:
        check_pair(IDEMPOTENCY_KEY, idempotency_key)
        values[IDEMPOTENCY_KEY] = idempotency_key
        unique |= {IDEMPOTENCY_KEY}
    timeout_at = None if timeout is None else _later("timeout", timeout, allow_zero=False)
    target = resolve_world(world)
    # a run that may wait (a slot, a start time) is not run ahead
    waits = bool(limits) or start_at is not None
    starter = None if waits else _eager_starter(target, fn.name)
    request = CreateRunRequest(
        run_id=new_run_id(),
        workflow=fn.name,
        args=payload,
        attributes=values,
        unique=unique,
        timeout_at=timeout_at,
        limits=limits,
        start_at=start_at,
        windows=windows,
    )
    if starter is None:
        created = await target.create_run(request)
    else:
        outcome = None
        try:
            request = await starter.first_task(request)
            created = outcome = await target.create_run(request)
        finally:
            starter.adopt(request, outcome)
    if created.conflict is not None:
        refused = created.conflict
        holder: Run[R] = Run(refused.holder_run_id, world=world, workflow=fn)
        if refused.key == IDEMPOTENCY_KEY:
            return holder
        raise AttributeConflictError(
            refused.key,
            refused.value,
            holder,
            limit=refused.limit,
            pruned=refused.holder_pruned,
        )
    return Run(request.run_id, world=world, workflow=fn, record=created.run)


def _later(what: str, span: float | timedelta, *, allow_zero: bool) -> datetime:
    """Now plus ``span`` seconds, clamped to 9000-01-01 (far enough to mean "never")."""
    if isinstance(span, bool) or not isinstance(span, int | float | timedelta):
        raise TypeError(f"{what} is seconds or a timedelta, not {type(span).__name__}")
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{what} must be {bound} seconds, got {span}")
    latest = datetime(9000, 1, 1, tzinfo=UTC)
    now = datetime.now(UTC)
    if seconds >= (latest - now).total_seconds():
        return latest
    return now + timedelta(seconds=seconds)


async def _start_child(
    runtime: _runtime.Runtime,
    fn: WorkflowDefinition[..., R],
    payload: bytes,
    values: dict[str, AttributeValue],
    unique: frozenset[str],
    idempotency_key: str | None,
    timeout: float | timedelta | None,
    on_parent_close: str,
    world: World | None,
) -> Run[R]:
    if idempotency_key is not None:
        raise ValueError(
            "idempotency_key= is not taken inside a workflow: a child start is recorded, so "
            "it happens once already; to dedupe across runs use attributes={k: Unique(v)}"
        )
    seconds = None
    if timeout is not None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
        if not seconds > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
    request = _runtime.ChildRequest(fn.name, payload, values, unique, on_parent_close, seconds)
    run_id = await runtime.start_child(request)
    return Run(run_id, world=world, workflow=fn)


def _caller() -> str:
    """Who is asking, for the log: user@host."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def get_run(run_id: str, *, world: World | None = None) -> Run[Any]:
    """A handle to run ``run_id``; no I/O happens until a method is awaited."""
    return Run(run_id, world=world)


async def find_run(
    key: str, value: AttributeValue, *, world: World | None = None
) -> Run[Any] | None:
    """The run holding the unique pair (``key``, ``value``), or ``None``.

    A pair whose reuse window freed it (``Unique(..., ttl=, release_on=)``) has
    no holder. A pruned holder's tombstone still answers with that run's id,
    though the run itself is gone (``Run.status()`` raises ``RunNotFoundError``;
    ``Run.claims()`` of a live holder show ``pruned_status`` None).
    """
    key, value = check_pair(key, value)
    claim = await resolve_world(world).find_claim(key, value)
    return None if claim is None else Run(claim.run_id, world=world)


@dataclass(frozen=True, slots=True)
class RunList:
    """One page of ``list_runs``: iterate it; pass ``next_cursor`` back for more."""

    runs: list[Run[Any]]
    next_cursor: str | None

    def __iter__(self) -> Iterator[Run[Any]]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)


async def list_runs(
    *,
    workflow: str | WorkflowDefinition[..., Any] | None = None,
    status: RunStatus | str | list[RunStatus | str] | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = 100,
    cursor: str | None = None,
    query: str | Expr | None = None,
    world: World | None = None,
) -> RunList:
    """Runs matching every given filter, newest first, one page at a time.

    ``query`` is a filter in the language of ``workflow.query`` (text, or a tree
    from ``workflow.query.parse``), ANDed with the other filters.

    Raises:
        QuerySyntaxError: ``query`` is malformed (a ``ValueError``).
        NotImplementedError: the world cannot serve ``query``; the message says why.
    """
    where = parse_query(query) if isinstance(query, str) else query
    if isinstance(workflow, WorkflowDefinition):
        workflow = workflow.name
    statuses = None
    if status is not None:
        items = status if isinstance(status, list) else [status]
        statuses = frozenset(RunStatus(s) for s in items)
    checked = dict(check_pair(k, v) for k, v in (attributes or {}).items())
    for name, moment in (("created_after", created_after), ("created_before", created_before)):
        if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
            raise ValueError(f"{name} must be timezone-aware, got {moment!r}")
    if not 1 <= limit <= 1000:
        raise ValueError(f"limit must be 1-1000, got {limit}")
    page = await resolve_world(world).list_runs(
        RunQuery(
            workflow=workflow,
            statuses=statuses,
            attributes=checked,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            cursor=cursor,
            where=where,
        )
    )
    runs: list[Run[Any]] = [Run(r.id, world=world, record=r) for r in page.runs]
    return RunList(runs, page.next_cursor)


async def prune_runs(
    *,
    closed_before: datetime,
    limit: int = 1000,
    release_claims: bool = False,
    world: World | None = None,
) -> list[str]:
    """Delete runs that closed before ``closed_before``; keep their claims as tombstones.

    Retention is not uniqueness: each pruned run's unique claims stay as
    tombstones (pair, run id, final status, generation), so a later start of
    the pair is still refused, by an ``AttributeConflictError`` saying the
    holder was pruned (policies see the holder's final status). With
    ``release_claims=True`` the pairs are released instead and may be claimed
    again (with a higher generation). Claims whose ``ttl`` lapsed are released
    either way. Deletes at most ``limit`` runs, oldest first, in one atomic
    world operation; returns their ids. Call it again to prune more.
    """
    if closed_before.tzinfo is None:
        raise ValueError("closed_before must be timezone-aware")
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    if not isinstance(release_claims, bool):
        raise TypeError("release_claims is True or False")
    return await resolve_world(world).prune_runs(
        closed_before, limit, release_claims=release_claims
    )


async def resume_hook(
    token: str, payload: Any = None, *, resume_id: str | None = None, world: World | None = None
) -> Run[Any]:
    """Deliver ``payload`` to the hook ``token`` and return the run that holds it.

    Each call delivers once; calls with the same ``resume_id`` deliver once in
    all (retries of one webhook, say).

    Raises:
        HookNotFoundError: no open run holds ``token``.
        TypeError: ``payload`` cannot be recorded; nothing was delivered.
    """
    check_token(token)
    if resume_id is not None:
        check_text("resume_id", resume_id)
    encoded = encode_result(payload, "the hook payload")
    run_id = await resolve_world(world).resume_hook(token, encoded, resume_id)
    if run_id is None:
        raise HookNotFoundError(token)
    return Run(run_id, world=world)


async def list_hooks(*, run_id: str | None = None, world: World | None = None) -> list[HookRecord]:
    """The live hooks of run ``run_id`` (or of every open run), oldest first."""
    return await resolve_world(world).list_hooks(run_id)
