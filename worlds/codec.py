"""Payload codecs: transform what a world stores (encryption at rest, compression).

::

    from worlds.codec import CodecWorld
    world = CodecWorld(worlds.open("sqlite:///app.db"), FernetCodec(key))
    async with world, Worker(world, [checkout]):
        run = await start(checkout, "o-1", world=world)

A ``CodecWorld`` wraps any world: every payload passes through the codec on
its way in and back out, so the engine, the client and the worker see plain
values while the storage holds only the codec's output. Configure it once per
world object; give every process that uses the world (workers, clients, the
CLI's own code) the same codec.

What is transformed: run arguments (``start``, ``continue_as_new``), step
arguments, step and run results, hook payloads, and the message and traceback
of recorded errors (a ``base64`` text, since errors are stored as text).

What stays in clear, by design: attributes and claims (the world indexes and
searches them: never put secrets in them), hook tokens, workflow and step
names, error type names, cancel reasons, timestamps and statuses.

Stored bytes the codec wrote start with ``0xC1``, a byte MessagePack never
uses, so rows written before a codec was configured stay readable as they are.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import msgspec

from worlds.protocol import PROTOCOL_VERSION, World
from worlds.types import (
    AttributeValue,
    ChildClosed,
    Claim,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    ErrorInfo,
    EventKind,
    FirstTask,
    HookDelivery,
    HookReceived,
    HookRecord,
    HookStartResult,
    NewWorkItem,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunPage,
    RunQuery,
    RunRecord,
    ScheduleLease,
    ScheduleRecord,
    Slot,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StreamChunk,
    StreamWritten,
    WorkItem,
)

__all__ = ["MARKER", "TEXT_PREFIX", "CodecWorld", "PayloadCodec"]

MARKER = b"\xc1"
"""First byte of every payload a codec wrote (never used by MessagePack)."""

TEXT_PREFIX = "wf-codec:"
"""Start of an error message or traceback a codec wrote (then base64)."""


@runtime_checkable
class PayloadCodec(Protocol):
    """Turns payload bytes into what is stored, and back. ``decode(encode(b)) == b``.

    Both run in the event loop of the caller: keep them fast (or CPU-bound only).
    A ``decode`` that fails (a wrong key, say) raises, and the call that read the
    payload fails with it.
    """

    def encode(self, data: bytes) -> bytes:
        """The bytes to store for ``data``."""
        ...

    def decode(self, data: bytes) -> bytes:
        """The original bytes of stored ``data``."""
        ...


class CodecWorld:
    """A world that passes every payload of ``inner`` through ``codec``.

    Args:
        inner: the world that stores the transformed payloads.
        codec: a ``PayloadCodec`` (``encode``/``decode`` of bytes).
    """

    protocol_version = PROTOCOL_VERSION

    def __init__(self, inner: World, codec: PayloadCodec) -> None:
        if not isinstance(codec, PayloadCodec):
            raise TypeError(f"codec must have encode(bytes) and decode(bytes), got {codec!r}")
        self.inner = inner
        self.codec = codec
        self.url = inner.url

    def __repr__(self) -> str:
        return f"CodecWorld({self.inner!r})"

    def __getattr__(self, name: str) -> object:
        # what a backend offers beyond the protocol (``path``, ``next_due``, ...)
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ bytes and text

    def _in(self, data: bytes) -> bytes:
        return MARKER + self.codec.encode(data)

    def _out(self, data: bytes) -> bytes:
        return self.codec.decode(data[1:]) if data[:1] == MARKER else data

    def _text_in(self, text: str) -> str:
        encoded = self._in(text.encode("utf-8", "surrogatepass"))
        return TEXT_PREFIX + base64.b64encode(encoded).decode("ascii")

    def _text_out(self, text: str) -> str:
        if not text.startswith(TEXT_PREFIX):
            return text
        try:
            raw = base64.b64decode(text[len(TEXT_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            return text
        return self._out(raw).decode("utf-8", "surrogatepass")

    def _error(self, error: ErrorInfo, text: Callable[[str], str]) -> ErrorInfo:
        trace = None if error.traceback is None else text(error.traceback)
        return ErrorInfo(type=error.type, message=text(error.message), traceback=trace)

    def _event(self, event: EventKind, data: Callable[[bytes], bytes], inward: bool) -> EventKind:
        text = self._text_in if inward else self._text_out
        replace = msgspec.structs.replace
        match event:
            case RunCreated() | RunContinued() | StepCreated():
                return replace(event, args=data(event.args))
            case RunCompleted() | StepCompleted():
                return replace(event, result=data(event.result))
            case RunFailed() | StepRetrying() | StepFailed():
                return replace(event, error=self._error(event.error, text))
            case HookReceived():
                return replace(event, payload=data(event.payload))
            case StreamWritten():
                return replace(event, data=data(event.data))
            case ChildClosed():
                result = None if event.result is None else data(event.result)
                error = None if event.error is None else self._error(event.error, text)
                return replace(event, result=result, error=error)
            case _:
                return event

    def _events_out(self, events: Sequence[EventKind]) -> list[EventKind]:
        return [self._event(event, self._out, False) for event in events]

    def _record(self, record: RunRecord | None) -> RunRecord | None:
        if record is None or (record.result is None and record.error is None):
            return record
        return msgspec.structs.replace(
            record,
            result=None if record.result is None else self._out(record.result),
            error=None if record.error is None else self._error(record.error, self._text_out),
        )

    def _item(self, item: WorkItem) -> WorkItem:
        return (
            msgspec.structs.replace(item, payload=self._out(item.payload)) if item.payload else item
        )

    def _new_item(self, item: NewWorkItem) -> NewWorkItem:
        return (
            msgspec.structs.replace(item, payload=self._in(item.payload)) if item.payload else item
        )

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc, tb)

    async def close(self) -> None:
        """Close the inner world."""
        await self.inner.close()

    async def migrate(self) -> int:
        """See ``World.migrate``."""
        return await self.inner.migrate()

    async def info(self) -> dict[str, str | int]:
        """The inner world's facts."""
        return await self.inner.info()

    # ------------------------------------------------------------------ writes

    def _create_in(self, request: CreateRunRequest) -> CreateRunRequest:
        first = request.first
        if first is not None:
            first = FirstTask(
                events=tuple(self._event(event, self._in, True) for event in first.events),
                schedule=tuple(self._new_item(item) for item in first.schedule),
                at=first.at,
            )
        return msgspec.structs.replace(request, args=self._in(request.args), first=first)

    def _commit_in(self, request: CommitRequest) -> CommitRequest:
        return msgspec.structs.replace(
            request,
            events=tuple(self._event(event, self._in, True) for event in request.events),
            schedule=tuple(self._new_item(item) for item in request.schedule),
        )

    def _commit_out(self, result: CommitResult) -> CommitResult:
        return msgspec.structs.replace(
            result,
            events=tuple(self._events_out(result.events)),
            leased=tuple(self._item(item) for item in result.leased),
        )

    async def create_run(self, request: CreateRunRequest) -> CreateRunResult:
        """See ``World.create_run``; the arguments (and a first task's payloads) are encoded."""
        result = await self.inner.create_run(self._create_in(request))
        return msgspec.structs.replace(
            result,
            run=self._record(result.run),
            leased=None if result.leased is None else self._item(result.leased),
            first=None if result.first is None else self._commit_out(result.first),
        )

    async def commit(self, request: CommitRequest) -> CommitResult:
        """See ``World.commit``; payloads in events and scheduled work are encoded."""
        return self._commit_out(await self.inner.commit(self._commit_in(request)))

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        """See ``World.commit_many``; each request as ``commit`` encodes it."""
        outcomes = await self.inner.commit_many([self._commit_in(request) for request in requests])
        return [
            outcome if isinstance(outcome, Exception) else self._commit_out(outcome)
            for outcome in outcomes
        ]

    async def start_or_resume_hook(
        self, request: CreateRunRequest, delivery: HookDelivery
    ) -> HookStartResult:
        """See ``World.start_or_resume_hook``; the arguments and the payload are encoded."""
        encoded = msgspec.structs.replace(delivery, payload=self._in(delivery.payload))
        result = await self.inner.start_or_resume_hook(self._create_in(request), encoded)
        return msgspec.structs.replace(result, run=self._record(result.run))

    async def reopen_run(self, run_id: str, by: str) -> RunRecord | None:
        """See ``World.reopen_run``."""
        return self._record(await self.inner.reopen_run(run_id, by))

    async def fork_run(
        self, source_run_id: str, run_id: str, from_step: int, by: str
    ) -> RunRecord | None:
        """See ``World.fork_run``."""
        return self._record(await self.inner.fork_run(source_run_id, run_id, from_step, by))

    async def append_stream(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int | None:
        """See ``World.append_stream``; each chunk is encoded."""
        return await self.inner.append_stream(run_id, name, [self._in(c) for c in chunks])

    async def read_stream(
        self, run_id: str, name: str, start: int = 0, limit: int = 1000
    ) -> list[StreamChunk]:
        """See ``World.read_stream``; each chunk is decoded."""
        chunks = await self.inner.read_stream(run_id, name, start, limit)
        return [msgspec.structs.replace(c, data=self._out(c.data)) for c in chunks]

    async def cancel_run(self, run_id: str, reason: str | None) -> RunRecord | None:
        """See ``World.cancel_run`` (the reason stays in clear)."""
        return self._record(await self.inner.cancel_run(run_id, reason))

    async def resume_hook(
        self, token: str, payload: bytes, resume_id: str | None = None
    ) -> str | None:
        """See ``World.resume_hook``; the payload is encoded."""
        return await self.inner.resume_hook(token, self._in(payload), resume_id)

    async def list_hooks(self, run_id: str | None = None) -> list[HookRecord]:
        """See ``World.list_hooks``."""
        return await self.inner.list_hooks(run_id)

    async def request_cancel(
        self, run_id: str, reason: str | None, grace_seconds: float
    ) -> RunRecord | None:
        """See ``World.request_cancel`` (the reason stays in clear)."""
        return self._record(await self.inner.request_cancel(run_id, reason, grace_seconds))

    # ------------------------------------------------------------------ work

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        """See ``World.lease``; payloads are decoded."""
        items = await self.inner.lease(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )
        return [self._item(item) for item in items]

    async def renew_leases(
        self, worker_id: str, items: Sequence[WorkItem], lease_seconds: float
    ) -> list[bool]:
        """See ``World.renew_leases``."""
        return await self.inner.renew_leases(worker_id, items, lease_seconds)

    async def release(self, worker_id: str, items: Sequence[WorkItem]) -> None:
        """See ``World.release``."""
        await self.inner.release(worker_id, items)

    async def wait(self, topic: str, timeout: float) -> None:
        """See ``World.wait``."""
        await self.inner.wait(topic, timeout)

    # ------------------------------------------------------------------ reads

    async def get_run(self, run_id: str) -> RunRecord | None:
        """See ``World.get_run``; the result and error are decoded."""
        return self._record(await self.inner.get_run(run_id))

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventKind]:
        """See ``World.read_events``; payloads are decoded."""
        return self._events_out(await self.inner.read_events(run_id, after_seq))

    async def list_runs(self, query: RunQuery) -> RunPage:
        """See ``World.list_runs``; results and errors are decoded."""
        page = await self.inner.list_runs(query)
        runs = tuple(record for r in page.runs if (record := self._record(r)) is not None)
        return msgspec.structs.replace(page, runs=runs)

    async def find_claim(self, key: str, value: AttributeValue) -> Claim | None:
        """See ``World.find_claim``."""
        return await self.inner.find_claim(key, value)

    async def run_claims(self, run_id: str) -> list[Claim]:
        """See ``World.run_claims``."""
        return await self.inner.run_claims(run_id)

    async def list_slots(self, key: str, value: AttributeValue) -> list[Slot]:
        """See ``World.list_slots``."""
        return await self.inner.list_slots(key, value)

    async def run_slots(self, run_id: str) -> list[Slot]:
        """See ``World.run_slots``."""
        return await self.inner.run_slots(run_id)

    def now(self) -> datetime:
        """See ``World.now``."""
        return self.inner.now()

    async def prune_runs(
        self, closed_before: datetime, limit: int = 1000, *, release_claims: bool = False
    ) -> list[str]:
        """See ``World.prune_runs``."""
        return await self.inner.prune_runs(closed_before, limit, release_claims=release_claims)

    # ------------------------------------------------------------------ schedules
    # A schedule's spec (its cron, overlap rule and the arguments of its runs) stays
    # in clear: the world reads it to compute fire times. Its runs' arguments are
    # encoded when a fire creates them, like any other run's.

    async def create_schedule(self, record: ScheduleRecord) -> ScheduleRecord:
        """See ``World.create_schedule``."""
        return await self.inner.create_schedule(record)

    async def get_schedule(self, schedule_id: str) -> ScheduleRecord | None:
        """See ``World.get_schedule``."""
        return await self.inner.get_schedule(schedule_id)

    async def list_schedules(
        self, *, after: str | None = None, limit: int = 100
    ) -> list[ScheduleRecord]:
        """See ``World.list_schedules``."""
        return await self.inner.list_schedules(after=after, limit=limit)

    async def update_schedule(self, record: ScheduleRecord) -> ScheduleRecord | None:
        """See ``World.update_schedule``."""
        return await self.inner.update_schedule(record)

    async def delete_schedule(self, schedule_id: str) -> bool:
        """See ``World.delete_schedule``."""
        return await self.inner.delete_schedule(schedule_id)

    async def lease_schedules(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> ScheduleLease:
        """See ``World.lease_schedules``."""
        return await self.inner.lease_schedules(
            worker_id, names=names, limit=limit, lease_seconds=lease_seconds
        )
