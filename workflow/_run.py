"""``Run``: a handle to one run, as the client sees it from outside a workflow.

Creating one does no I/O; each method asks the world (``Run.world``: the one
given, or the one in force, ``workflow._world_resolution``). In workflow code,
``result()`` of a child run waits durably through the runtime instead.
"""

from __future__ import annotations

import getpass
import math
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, Generic, TypeVar

import anyio

from workflow import _runtime
from workflow._attributes import check_text
from workflow._codec import decode_result, encode_result
from workflow._run_waiters import wait_closed
from workflow._spans import span_seconds
from workflow._update_calls import send_update
from workflow._world_resolution import resolve_world
from workflow.decorators import WorkflowDefinition
from workflow.errors import RunCancelledError, RunFailedError, RunNotFoundError
from worlds.codec import codec_required
from worlds.errors import CodecRequiredError
from worlds.protocol import World, run_topic
from worlds.query import AttrRef, Compare, RunQuery
from worlds.semantics import PARENT_KEY, check_stream_name, new_run_id
from worlds.types import (
    AttributeValue,
    Claim,
    EventKind,
    RunCancelled,
    RunContinued,
    RunRecord,
    RunStatus,
    Slot,
)

__all__ = ["Run"]

R = TypeVar("R")

_STREAM_PAGE = 1000
"""Chunks ``Run.stream`` reads per round trip."""


class Run(Generic[R]):
    """A handle to one run. Creating one does no I/O; each method asks the world."""

    def __init__(
        self,
        run_id: str,
        *,
        world: World | None = None,
        workflow: WorkflowDefinition[..., R] | None = None,
        record: RunRecord | None = None,
        tombstone: Claim | None = None,
        running_here: bool = False,
    ) -> None:
        self._id = run_id
        self._world = world
        self._workflow = workflow
        self._tombstone = tombstone
        # ``start`` sets it when a Worker of this process took the new run: its
        # close is signalled here, so the first ``result`` waits before it reads.
        self._running_here = running_here
        self.record = record
        """The run as last read by ``list_runs``/``find_run``, if any (may be stale)."""

    @property
    def pruned_status(self) -> RunStatus | None:
        """How the run had closed, when ``find_run`` found only its tombstone: the run
        was pruned, and its methods raise ``RunNotFoundError`` saying so. ``None`` for
        any other handle."""
        return None if self._tombstone is None else self._tombstone.pruned_status

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

    def _not_found(self) -> RunNotFoundError:
        tombstone = self._tombstone
        if tombstone is None or tombstone.pruned_status is None:
            return RunNotFoundError(self._id)
        pair = (tombstone.key, tombstone.value)
        return RunNotFoundError(self._id, pruned_status=tombstone.pruned_status, claim=pair)

    async def _record(self) -> RunRecord:
        record = await self.world.get_run(self._id)
        if record is None:
            raise self._not_found()
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
        ends after the last one: a world takes no chunk once its run closed, or once
        the workflow closed the stream (``close_stream``): the reader ends then too.
        """
        check_stream_name(name)
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"start must be an offset >= 0, got {start!r}")
        offset = start
        closed = False
        while True:
            chunks = await self.world.read_stream(self._id, name, offset, _STREAM_PAGE)
            for chunk in chunks:
                try:
                    value = decode_result(chunk.data, None)
                except CodecRequiredError:
                    raise await codec_required(self.world) from None
                yield value
                offset = chunk.offset + 1
            if len(chunks) == _STREAM_PAGE:
                continue
            if not chunks:
                if closed or not follow:
                    return
                # read once more after seeing the run or the stream closed: that read gets
                # the last chunks (a world takes none after either closed)
                closed = (await self._record()).status.is_closed or (
                    await self.world.stream_closed(self._id, name)
                )
                if closed:
                    continue
            elif not follow:
                continue
            await self.world.wait(run_topic(self._id), 1.0)

    async def update(
        self,
        name: str,
        payload: Any = None,
        update_id: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Send update ``name`` with ``payload`` to the run and return the workflow's reply
        (``receive_updates(name)``, ``update.reply(value)``; ``rfcs/0021-updates.md``).

        Every call with the same ``update_id``, from any number of callers and
        processes, delivers the update once and gets the same recorded answer, also
        after the run closed. Without ``update_id`` a fresh one is used (no retry).

        Raises:
            UpdateRejectedError: the workflow refused it (``update.reject(message)``).
            UpdateFailedError: the run was closed or unknown when it came, or closed
                before replying; ``reason`` says which.
            TimeoutError: ``timeout`` seconds passed first (the update stays delivered).
            TypeError / ValueError: a bad name, id or payload; nothing was sent.
        """
        return await send_update(self.world, self._id, name, payload, update_id, timeout)

    async def pin(self) -> None:
        """Exempt this run from pruning: retention (``set_retention``) and every
        ``prune_runs`` pass it over until ``unpin()``.

        The pin is the attribute ``$pinned = True`` on the run (the world sets
        it; ``wf runs list --query '$pinned = true'`` lists pinned runs). Pinning
        an open run keeps it once it closes. Pinning twice changes nothing.

        Raises:
            RunNotFoundError: no such run (it may have been pruned already).
        """
        await self._pin(True)

    async def unpin(self) -> None:
        """Undo ``pin()``: the run is pruned again like any other once it is past its
        retention. Unpinning a run that is not pinned changes nothing.

        Raises:
            RunNotFoundError: no such run.
        """
        await self._pin(False)

    async def _pin(self, pinned: bool) -> None:
        record = await self.world.pin_run(self._id, pinned)
        if record is None:
            raise self._not_found()
        self.record = record

    async def start_now(self) -> None:
        """Start this delayed or debounced run at once, instead of at its start time.

        Flow control still applies: a run waiting for a slot of a ``Limited`` pair
        stays in line (it starts when promoted), and a ``RateLimited`` run starts
        no earlier than its pairs' windows allow.

        Raises:
            RunNotFoundError: no such run.
            ValueError: the run has already started (it is not pending, or a
                worker has begun it); nothing changed.
        """
        await self._move(None)

    async def set_delay(self, delay: float | timedelta) -> None:
        """Move this pending run's start to ``delay`` (seconds or a ``timedelta``,
        0 to 100 years) from now, earlier or later than it was.

        A ``RateLimited`` run starts no earlier than its pairs' windows allow (its
        tokens move with it).

        Raises:
            RunNotFoundError: no such run.
            TypeError / ValueError: a bad ``delay``; or the run has already started
                (not pending, or a worker has begun it), or it waits for a slot of
                a ``Limited`` pair (its start is its promotion); nothing changed.
        """
        await self._move(span_seconds("delay", delay))

    async def _move(self, delay: float | None) -> None:
        record = await self.world.move_start(self._id, delay)
        if record is None:
            raise self._not_found()

    async def retry(self, *, by: str | None = None) -> None:
        """Reopen this failed or cancelled run: same id, its recorded steps kept.

        The steps that failed, or never finished, run again (with a fresh retry
        budget) and the body replays past everything recorded; the run keeps the
        unique claims it still holds. The log records ``RunReopened`` naming
        ``by`` (default: this user and host). The run holds its hooks' tokens
        again, and takes its slots again (its ``Limited`` start pairs, the
        ``hold()`` block it was in) before anything of it runs: while one is not
        free it waits ``pending``, in line like any other run.

        Raises:
            RunNotFoundError: no such run.
            ValueError: the run is not failed or cancelled, another run holds one
                of its hook tokens now, or one of its pairs is held with another
                limit; nothing changed.
        """
        who = caller() if by is None else check_text("by", by)
        before = (await self._record()).status
        record = None
        if before in (RunStatus.FAILED, RunStatus.CANCELLED):
            record = await self.world.reopen_run(self._id, who)
            if record is None:
                raise self._not_found()
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
        ``by`` (default: this user and host). Like a retried run it holds the
        tokens of the hooks its replayed part created, and takes its slots before
        it runs (waiting ``pending`` while one is not free).

        Raises:
            RunNotFoundError: no such run.
            ValueError: this run has no step ``from_step``, another run holds one of
                its hook tokens, or one of its pairs is held with another limit.
        """
        if isinstance(from_step, bool) or not isinstance(from_step, int) or from_step < 1:
            raise ValueError(f"from_step must be a step number >= 1, got {from_step!r}")
        who = caller() if by is None else check_text("by", by)
        run_id = new_run_id()
        record = await self.world.fork_run(self._id, run_id, from_step, who)
        if record is None:
            raise self._not_found()
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
            raise self._not_found()

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
        closed: RunRecord | None = None
        # A run this process's Worker took at its start was pending a moment ago and
        # its close will be signalled here (a signal nobody waited for is kept):
        # wait first, then read, one read of the run fewer (RFC 0018).
        unread, self._running_here = self._running_here, False
        while True:
            if unread:
                unread = False
                closed = await wait_closed(
                    current.world, current.id, deadline - anyio.current_time(), unread=True
                )
            record = closed if closed is not None else await current._record()
            closed = None
            if record.status is RunStatus.CONTINUED:
                current = await current._successor(record)
                continue
            if record.status.is_closed:
                current.record = record
                return await current._outcome(record)
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                raise TimeoutError(f"run {current.id} did not finish within {timeout} s")
            # one reader for every waiter of this world: N waiters are not N reads a second
            closed = await wait_closed(current.world, current.id, remaining)

    async def _successor(self, record: RunRecord) -> Run[R]:
        last = (await self.world.read_events(self._id, after_seq=record.last_seq - 1))[-1]
        assert isinstance(last, RunContinued)
        return Run(last.next_run_id, world=self._world, workflow=self._workflow)

    async def _outcome(self, record: RunRecord) -> R:
        if record.status is RunStatus.COMPLETED:
            assert record.result is not None
            fn = self._workflow.fn if self._workflow is not None else None
            try:
                value: R = decode_result(record.result, fn)
            except CodecRequiredError:
                raise await codec_required(self.world) from None
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


def caller() -> str:
    """Who is asking, for the log: user@host."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
