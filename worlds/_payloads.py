"""Where a world's records carry payloads, and passing each through a codec.

``Payloads`` knows, for every record the protocol moves (events, run records,
work items, create and commit requests and results), which fields are
payloads: run and step arguments, results, hook payloads, update payloads and
replies, stream chunks, and
the message and traceback of recorded errors (as text). It encodes them on
the way in and decodes them on the way out; ``worlds.codec.CodecWorld`` is the
world that uses it. Everything else stays as it is.

Stored bytes a codec wrote start with ``MARKER``, a byte MessagePack never
uses, and texts with ``TEXT_PREFIX``, so what was written before a codec was
configured stays readable as it is.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import msgspec

from worlds.query import RunPage
from worlds.types import (
    ChildClosed,
    CommitRequest,
    CommitResult,
    CreateRunRequest,
    CreateRunResult,
    ErrorInfo,
    EventKind,
    FailureHandler,
    FirstTask,
    HookDelivery,
    HookReceived,
    HookStartResult,
    NewWorkItem,
    RunCompleted,
    RunContinued,
    RunCreated,
    RunFailed,
    RunRecord,
    ScheduleFire,
    StepCompleted,
    StepCreated,
    StepFailed,
    StepRetrying,
    StreamChunk,
    StreamWritten,
    UpdateDelivery,
    UpdateOutcome,
    UpdateReceived,
    UpdateRejected,
    UpdateReplied,
    UpdateStartResult,
    WorkItem,
)

__all__ = ["MARKER", "TEXT_PREFIX", "PayloadCodec", "Payloads"]

MARKER = b"\xc1"
"""First byte of every payload a codec wrote (never used by MessagePack)."""

TEXT_PREFIX = "wf-codec:"
"""Start of an error message or traceback a codec wrote (then base64)."""

_replace = msgspec.structs.replace


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


class Payloads:
    """The payloads of protocol records, passed through ``codec`` (``in_``: encoded,
    ``out``: decoded)."""

    def __init__(self, codec: PayloadCodec) -> None:
        if not isinstance(codec, PayloadCodec):
            raise TypeError(f"codec must have encode(bytes) and decode(bytes), got {codec!r}")
        self.codec = codec

    def in_(self, data: bytes) -> bytes:
        """``data`` as stored."""
        return MARKER + self.codec.encode(data)

    def out(self, data: bytes) -> bytes:
        """Stored ``data`` as written (unchanged if no codec wrote it)."""
        return self.codec.decode(data[1:]) if data[:1] == MARKER else data

    def _text_in(self, text: str) -> str:
        encoded = self.in_(text.encode("utf-8", "surrogatepass"))
        return TEXT_PREFIX + base64.b64encode(encoded).decode("ascii")

    def _text_out(self, text: str) -> str:
        if not text.startswith(TEXT_PREFIX):
            return text
        try:
            raw = base64.b64decode(text[len(TEXT_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            return text
        return self.out(raw).decode("utf-8", "surrogatepass")

    def _error(self, error: ErrorInfo, text: Callable[[str], str]) -> ErrorInfo:
        trace = None if error.traceback is None else text(error.traceback)
        return ErrorInfo(type=error.type, message=text(error.message), traceback=trace)

    def _event(self, event: EventKind, inward: bool) -> EventKind:
        data, text = (self.in_, self._text_in) if inward else (self.out, self._text_out)
        match event:
            case RunCreated() | RunContinued() | StepCreated():
                return _replace(event, args=data(event.args))
            case RunCompleted() | StepCompleted():
                return _replace(event, result=data(event.result))
            case RunFailed(handler=FailureHandler() as handler):
                handler = msgspec.structs.replace(handler, args=data(handler.args))
                return _replace(event, error=self._error(event.error, text), handler=handler)
            case RunFailed() | StepRetrying() | StepFailed():
                return _replace(event, error=self._error(event.error, text))
            case HookReceived():
                return _replace(event, payload=data(event.payload))
            case StreamWritten():
                return _replace(event, data=data(event.data))
            case UpdateReceived():
                return _replace(event, payload=data(event.payload))
            case UpdateReplied():
                return _replace(event, result=data(event.result))
            case UpdateRejected():
                return _replace(event, message=text(event.message))
            case ChildClosed():
                result = None if event.result is None else data(event.result)
                error = None if event.error is None else self._error(event.error, text)
                return _replace(event, result=result, error=error)
            case _:
                return event

    def events_out(self, events: Sequence[EventKind]) -> list[EventKind]:
        """Stored ``events`` decoded."""
        return [self._event(event, False) for event in events]

    def record_out(self, record: RunRecord | None) -> RunRecord | None:
        """A stored run record with its result and error decoded."""
        if record is None or (record.result is None and record.error is None):
            return record
        return _replace(
            record,
            result=None if record.result is None else self.out(record.result),
            error=None if record.error is None else self._error(record.error, self._text_out),
        )

    def item_out(self, item: WorkItem) -> WorkItem:
        """A leased work item with its payload decoded."""
        return _replace(item, payload=self.out(item.payload)) if item.payload else item

    def _new_item(self, item: NewWorkItem) -> NewWorkItem:
        return _replace(item, payload=self.in_(item.payload)) if item.payload else item

    def create_in(self, request: CreateRunRequest) -> CreateRunRequest:
        """``request`` with its arguments (and a first task's payloads) encoded."""
        first = request.first
        if first is not None:
            first = FirstTask(
                events=tuple(self._event(event, True) for event in first.events),
                schedule=tuple(self._new_item(item) for item in first.schedule),
                at=first.at,
            )
        return _replace(request, args=self.in_(request.args), first=first)

    def fires_in(self, fires: Sequence[ScheduleFire]) -> list[ScheduleFire]:
        """A ``fire_schedules`` batch with every start's arguments encoded."""
        return [
            _replace(
                fire,
                fires=tuple(
                    _replace(each, request=self.create_in(each.request)) for each in fire.fires
                ),
                buffered=None if fire.buffered is None else self.create_in(fire.buffered),
            )
            for fire in fires
        ]

    def created_out(self, result: CreateRunResult) -> CreateRunResult:
        """A ``create_run`` result with its run, lease and first commit decoded."""
        return _replace(
            result,
            run=self.record_out(result.run),
            leased=None if result.leased is None else self.item_out(result.leased),
            first=None if result.first is None else self.commit_out(result.first),
        )

    def commit_in(self, request: CommitRequest) -> CommitRequest:
        """``request`` with the payloads of its events and scheduled work encoded."""
        return _replace(
            request,
            events=tuple(self._event(event, True) for event in request.events),
            schedule=tuple(self._new_item(item) for item in request.schedule),
        )

    def commit_out(self, result: CommitResult) -> CommitResult:
        """A commit result with its events and leased items decoded."""
        return _replace(
            result,
            events=tuple(self.events_out(result.events)),
            leased=tuple(self.item_out(item) for item in result.leased),
        )

    def outcomes_out(
        self, outcomes: Sequence[CommitResult | Exception]
    ) -> list[CommitResult | Exception]:
        """``commit_many``'s outcomes with each result decoded (exceptions as they are)."""
        return [o if isinstance(o, Exception) else self.commit_out(o) for o in outcomes]

    def delivery_in(self, delivery: HookDelivery) -> HookDelivery:
        """A hook delivery with its payload encoded."""
        return _replace(delivery, payload=self.in_(delivery.payload))

    def hook_started_out(self, result: HookStartResult) -> HookStartResult:
        """A ``start_or_resume_hook`` result with its run decoded."""
        return _replace(result, run=self.record_out(result.run))

    def update_in(self, delivery: UpdateDelivery) -> UpdateDelivery:
        """An update with its payload encoded."""
        return _replace(delivery, payload=self.in_(delivery.payload))

    def outcome_out(self, outcome: UpdateOutcome) -> UpdateOutcome:
        """An update's outcome with its reply (or the body's rejection) decoded."""
        if outcome.state == "replied" and outcome.result is not None:
            return _replace(outcome, result=self.out(outcome.result))
        if outcome.state == "rejected" and outcome.message is not None:
            return _replace(outcome, message=self._text_out(outcome.message))
        return outcome

    def update_started_out(self, result: UpdateStartResult) -> UpdateStartResult:
        """An ``update_with_start`` result with its run and outcome decoded."""
        return _replace(
            result, run=self.record_out(result.run), outcome=self.outcome_out(result.outcome)
        )

    def page_out(self, page: RunPage) -> RunPage:
        """A page of ``list_runs`` with each run's result and error decoded."""
        found = (self.record_out(record) for record in page.runs)
        return _replace(page, runs=tuple(record for record in found if record is not None))

    def chunks_out(self, chunks: Sequence[StreamChunk]) -> list[StreamChunk]:
        """Stream chunks decoded."""
        return [_replace(chunk, data=self.out(chunk.data)) for chunk in chunks]
