"""JSON-ready views of runs and their event logs, shared by ``wf`` and ``wf ui``.

``wf runs list --json`` / ``GET /api/runs`` print ``run_to_json`` of each run;
``wf runs show --json`` / ``GET /api/runs/{id}`` print ``RunDetails.to_json``.
Both read the world only through the public ``Run`` handle, so the terminal and
the browser show the same thing, serialised by the same code.

::

    from workflow import get_run
    from workflow.views import gather_details

    details = await gather_details(get_run(run_id, world=world))
    details.to_json()          # {"run": ..., "claims": ..., "steps": ..., "events": ...}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from workflow.client import Run
from worlds.codec import MARKER
from worlds.quoting import quoted
from worlds.semantics import CLOSING_EVENTS
from worlds.types import (
    AttributeConflict,
    AttributeSet,
    ChildClosed,
    ChildConflict,
    ChildStarted,
    Claim,
    EventKind,
    HookConflict,
    HookCreated,
    HookReceived,
    PatchMarker,
    RunCancelled,
    RunContinued,
    RunCreated,
    RunFailed,
    RunForked,
    RunRecord,
    RunReopened,
    RunStatus,
    SlotAcquired,
    SlotReleased,
    SlotRequested,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StreamClosed,
    StreamWritten,
    UpdateReceived,
    UpdateRejected,
    UpdateReplied,
    WaitCompleted,
    WaitCreated,
)

__all__ = [
    "EVENTS_SHOWN",
    "EventWindow",
    "HookSummary",
    "RunDetails",
    "StepSummary",
    "decode_payload",
    "event_summary",
    "event_to_json",
    "format_age",
    "format_duration",
    "format_value",
    "gather_details",
    "run_to_json",
    "to_builtins",
]

EVENTS_SHOWN = 20
"""By default ``wf runs show`` prints this many events from each end of a longer log."""


def to_builtins(value: Any) -> Any:
    """``value`` as JSON-ready builtins (datetimes as ISO text, bytes as base64)."""
    return msgspec.to_builtins(value)


ENCODED = "written through a payload codec: read it with that codec (wf: --codec MODULE:NAME)"
"""What ``decode_payload`` says of a payload a codec wrote, read without the codec."""


def decode_payload(data: bytes) -> Any:
    """A msgpack payload as JSON-ready builtins; ``{"encoded": ENCODED}`` if a payload
    codec wrote it (read without the codec); ``{"base64": ...}`` if it is not msgpack."""
    if data[:1] == MARKER:
        return {"encoded": ENCODED}
    try:
        return to_builtins(msgspec.msgpack.decode(data))
    except (msgspec.DecodeError, TypeError, ValueError):
        return {"base64": to_builtins(data)}


def run_to_json(record: RunRecord, *, result: bool = True) -> dict[str, Any]:
    """A run as a JSON object: id, workflow, status, times, attributes, result/error.

    With ``result=False`` (listings) the result is left out, however large:
    ``has_result`` says whether there is one (``wf runs show`` prints it).
    """
    out: dict[str, Any] = {
        "id": record.id,
        "workflow": record.workflow,
        "status": record.status.value,
        "created_at": to_builtins(record.created_at),
        "started_at": to_builtins(record.started_at),
        "closed_at": to_builtins(record.closed_at),
        "attributes": to_builtins(record.attributes),
    }
    if not result:
        out["has_result"] = record.result is not None
    elif record.result is not None:
        out["result"] = decode_payload(record.result)
    if record.error is not None:
        out["error"] = {"type": record.error.type, "message": record.error.message}
    if record.build_id is not None:  # a run of a worker with a build id (RFC 0025)
        out["build_id"], out["pin"] = record.build_id, record.pin
    return out


def event_to_json(event: EventKind) -> dict[str, Any]:
    """An event as a JSON object: kind, seq, at, then its fields (payloads decoded)."""
    out: dict[str, Any] = {
        "kind": type(event).__struct_config__.tag,
        "seq": event.seq,
        "at": to_builtins(event.at),
    }
    for name in event.__struct_fields__:
        if name in ("seq", "at"):
            continue
        value = getattr(event, name)
        out[name] = decode_payload(value) if isinstance(value, bytes) else to_builtins(value)
    return out


def format_age(moment: datetime | None, now: datetime | None = None) -> str:
    """``moment`` as a short age: ``42s``, ``5m``, ``3h``, ``2d``."""
    if moment is None:
        return "-"
    seconds = max(0.0, ((now or datetime.now(UTC)) - moment).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def format_value(value: Any) -> str:
    """An attribute value as the CLI accepts it back (``k=v`` syntax)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):
        return value
    return json.dumps(value)


def format_duration(seconds: float) -> str:
    """A duration: ``12ms``, ``3.4s``, ``5m 2s``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest}s"


@dataclass(frozen=True)
class EventWindow:
    """Which events of a log to print: all, a seq range, or both ends of a long log."""

    first: int | None = None
    last: int | None = None
    everything: bool = False

    @classmethod
    def parse(cls, spec: str | None) -> EventWindow:
        """``None`` (both ends), ``all``, or ``A-B`` / ``A-`` / ``-B`` (seqs, inclusive).

        Raises:
            ValueError: any other spelling, or a range whose first seq is after its last.
        """
        if spec is None:
            return cls()
        if spec.strip().lower() == "all":
            return cls(everything=True)
        low, sep, high = spec.partition("-")
        try:
            if not sep or not (low.strip() or high.strip()):
                raise ValueError
            first = int(low) if low.strip() else None
            last = int(high) if high.strip() else None
        except ValueError:
            raise ValueError(
                f"--events takes all, or a range of seqs like 100-200, 100- or -50; "
                f"got {quoted(spec)}"
            ) from None
        if first is not None and last is not None and first > last:
            raise ValueError(
                f"--events {first}-{last} is the wrong way round: the first seq comes first "
                f"({last}-{first}?)"
            )
        return cls(first, last)

    def select(self, events: list[EventKind]) -> tuple[list[EventKind], tuple[int, int] | None]:
        """The events to print, and the (first, last) seq left out between them, if any."""
        if self.everything:
            return events, None
        if self.first is not None or self.last is not None:
            low = self.first if self.first is not None else 0
            high = self.last if self.last is not None else len(events) + 1_000_000
            return [e for e in events if low <= e.seq <= high], None
        if len(events) <= 2 * EVENTS_SHOWN + 10:
            return events, None
        head, tail = events[:EVENTS_SHOWN], events[-EVENTS_SHOWN:]
        return [*head, *tail], (head[-1].seq + 1, tail[0].seq - 1)


@dataclass
class StepSummary:
    """One step of a run, folded from its events."""

    number: int
    name: str
    status: str = "created"
    attempts: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None

    def duration(self) -> float | None:
        """Seconds from the first attempt's start to the outcome, if both happened."""
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "step": self.number,
            "name": self.name,
            "status": self.status,
            "attempts": self.attempts,
            "duration_seconds": self.duration(),
            "error": self.error,
        }


@dataclass
class HookSummary:
    """One hook of a run."""

    number: int
    token: str
    status: str = "waiting"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"hook": self.number, "token": self.token, "status": self.status}


@dataclass
class Waiting:
    """A limited pair a run waits in: who holds its slots, how many wait ahead.

    ``hold`` is 0 for a pending run's start-time slot (``Limited``), negative for
    a reopened or forked run waiting to take its slots again, else the number of
    the ``hold()`` block a running workflow waits in.
    """

    key: str
    value: Any
    limit: int
    holders: list[str]
    ahead: int
    hold: int = 0
    key_limit: int | None = None
    """The limit of the key over all its values (``set_key_limit``), if it has one."""
    key_held: int = 0
    """The slots of the key held over all its values."""

    def reason(self) -> str:
        """The sentence ``wf runs show`` prints."""
        pair_full = len(self.holders) >= self.limit
        if self.key_limit is not None and self.key_held >= self.key_limit and not pair_full:
            return (
                f"waiting for a {self.key} slot: {self.key_held} of {self.key_limit} held, "
                f"{format_value(self.value)} has {len(self.holders)}"
            )
        shown = ", ".join(self.holders[:5]) + (", ..." if len(self.holders) > 5 else "")
        held = f"held by {shown}" if self.holders else "none held yet"
        line = f" ({self.ahead} ahead in line)" if self.ahead else ""
        pair = f"{self.key}={format_value(self.value)}"
        block = f" (hold {self.hold})" if self.hold > 0 else ""
        if self.hold < 0:  # a reopened or forked run taking its slots again
            block = " (to go on)"
        return f"waiting for {pair}{block}: {len(self.holders)} of {self.limit} slots {held}{line}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "key": self.key,
            "value": self.value,
            "limit": self.limit,
            "holders": self.holders,
            "ahead": self.ahead,
            "hold": self.hold,
            "key_limit": self.key_limit,
            "key_held": self.key_held,
            "reason": self.reason(),
        }


@dataclass
class RunDetails:
    """A run with its claims, steps, hooks and log: what ``wf runs show`` and the UI show."""

    record: RunRecord
    claims: dict[str, Claim]
    events: list[EventKind]
    steps: list[StepSummary] = field(default_factory=list)
    hooks: list[HookSummary] = field(default_factory=list)
    window: EventWindow = field(default_factory=EventWindow)
    waiting: list[Waiting] = field(default_factory=list)
    parent: str | None = None
    children: list[RunRecord] = field(default_factory=list)
    starts_at: datetime | None = None
    start_reason: str | None = None
    """For a pending run made to wait: when it starts at the earliest, and why
    (``"delayed"``: ``start(delay=)``; ``"debounced"``: ``start_or_debounce``;
    ``"rate limited by KEY=VALUE"``: its ``RateLimited`` token)."""
    priority: int = 0
    waiting_for_build: str | None = None
    """The build an open run waits for: no live worker of the build it is pinned to
    (RFC 0025), so no other worker leases it until one starts."""
    """``start(..., priority=n)`` (from its ``RunCreated``)."""

    def start_note(self) -> str | None:
        """``starts at T (delayed by start(delay=))``, for a pending run that waits for a time."""
        if self.starts_at is None:
            return None
        why = {
            "delayed": "delayed by start(delay=)",
            "debounced": "debounced: another start_or_debounce moves it, up to max_delay",
        }.get(self.start_reason or "", self.start_reason or "")
        return f"starts at {self.starts_at.isoformat()} ({why})"

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document (``events`` as the window selects them)."""
        shown, omitted = self.window.select(self.events)
        return {
            "run": run_to_json(self.record),
            "claims": {
                key: {"value": format_value(claim.value), "generation": claim.generation}
                for key, claim in sorted(self.claims.items())
            },
            "steps": [step.to_json() for step in self.steps],
            "hooks": [hook.to_json() for hook in self.hooks],
            "waiting": [wait.to_json() for wait in self.waiting],
            "starts_at": None if self.starts_at is None else self.starts_at.isoformat(),
            "start_reason": self.start_reason,
            "priority": self.priority,
            "waiting_for_build": self.waiting_for_build,
            "parent": self.parent,
            "children": [run_to_json(child) for child in self.children],
            "events": [event_to_json(event) for event in shown],
            "events_total": len(self.events),
            "events_omitted": None if omitted is None else {"from": omitted[0], "to": omitted[1]},
        }


def _fold_steps(events: list[EventKind]) -> list[StepSummary]:
    steps: dict[int, StepSummary] = {}
    for event in events:
        if isinstance(event, StepCreated):
            steps[event.step] = StepSummary(event.step, event.name)
            continue
        if not isinstance(
            event, (StepStarted, StepCompleted, StepRetrying, StepFailed, StepDiscarded)
        ):
            continue
        step = steps.setdefault(event.step, StepSummary(event.step, "?"))
        step.attempts = max(step.attempts, event.attempt)
        if isinstance(event, StepStarted):
            step.status = "running"
            step.started_at = step.started_at or event.at
        elif isinstance(event, StepCompleted):
            step.status, step.ended_at = "completed", event.at
        elif isinstance(event, StepRetrying):
            step.status = "retrying"
            step.error = f"{event.error.type}: {event.error.message}"
        elif isinstance(event, StepFailed):
            step.status, step.ended_at = "failed", event.at
            step.error = f"{event.error.type}: {event.error.message}"
        else:
            step.status = f"discarded ({event.outcome})"
    return [steps[number] for number in sorted(steps)]


def _fold_hooks(events: list[EventKind]) -> list[HookSummary]:
    hooks: dict[int, HookSummary] = {}
    for event in events:
        if isinstance(event, HookCreated):
            hooks[event.hook] = HookSummary(event.hook, event.token)
        elif isinstance(event, HookReceived) and event.hook in hooks:
            hooks[event.hook].status = "received"
        elif isinstance(event, HookConflict):
            hooks[event.hook] = HookSummary(
                event.hook, event.token, f"conflict (held by {event.holder_run_id})"
            )
        if isinstance(event, CLOSING_EVENTS):  # closing a run disposes of its hooks
            for hook in hooks.values():
                if hook.status in ("waiting", "received"):
                    hook.status = "disposed"
    return [hooks[number] for number in sorted(hooks)]


async def gather_details(run: Run[Any], window: EventWindow | None = None) -> RunDetails:
    """Read the run, its claims, its log and the slots it waits for; fold steps and hooks."""
    events = await run.events()
    record = run.record
    assert record is not None  # events() read the record first
    claims = {claim.key: claim for claim in await run.claims() if claim.step is None}
    waiting = []
    for slot in await run.slots():
        if slot.holding:
            continue
        rows = await run.world.list_slots(slot.key, slot.value)
        holders = [row.run_id for row in rows if row.holding]
        line = [(row.run_id, row.hold) for row in rows if not row.holding]  # promotion order
        ahead = line.index((slot.run_id, slot.hold)) if (slot.run_id, slot.hold) in line else 0
        wait = Waiting(slot.key, slot.value, slot.limit, holders, ahead, slot.hold)
        if slot.hold <= 0:  # start-time slots also need one of their key's
            key_limit = await run.world.get_key_limit(slot.key)
            if key_limit is not None:
                wait.key_limit, wait.key_held = key_limit.limit, key_limit.held
        waiting.append(wait)
    parent = await run.parent()
    children = [child.record for child in await run.children() if child.record is not None]
    starts_at, start_reason = _start(record, events)
    waiting_for_build = await _build_awaited(run, record)
    return RunDetails(
        record,
        claims,
        events,
        _fold_steps(events),
        _fold_hooks(events),
        window or EventWindow(),
        waiting,
        None if parent is None else parent.id,
        children,
        starts_at,
        start_reason,
        _priority(events),
        waiting_for_build,
    )


async def _build_awaited(run: Run[Any], record: RunRecord) -> str | None:
    """The build ``record`` waits for: open, pinned to a build none of whose workers
    is live (a ``latest`` run waits only while no worker of any build is)."""
    if record.build_id is None or record.status.is_closed:
        return None
    serving = ("live", "silent")  # silent: the world stalled, it may be back
    live = {w.build_id for w in await run.world.list_workers() if w.status in serving}
    if record.pin == "latest":
        return None if live - {None} else record.build_id
    return None if record.build_id in live else record.build_id


def _priority(events: list[EventKind]) -> int:
    """The run's start priority (its ``RunCreated``'s)."""
    created = events[0] if events else None
    return created.priority if isinstance(created, RunCreated) else 0


def _start(record: RunRecord, events: list[EventKind]) -> tuple[datetime | None, str | None]:
    """When a pending run made to wait for a time starts, and why (from its ``RunCreated``)."""
    if record.status is not RunStatus.PENDING or not events:
        return None, None
    created = events[0]
    if not isinstance(created, RunCreated) or created.start_at is None:
        return None, None
    if created.rate_limited:
        return created.start_at, _rate_reason(record, created)
    return created.start_at, "debounced" if created.debounced else "delayed"


def _rate_reason(record: RunRecord, created: RunCreated) -> str:
    """``rate limited by customer=c-9: 10 per 60 s, next token in 4.2 s``."""
    pairs = []
    for key in created.rate_limited:
        pair = f"{key}={format_value(record.attributes.get(key))}"
        rate = created.rates.get(key)
        if rate is not None:
            pair += f": {rate[0]} per {rate[1]:g} s"
        pairs.append(pair)
    due = ""
    if created.start_at is not None:
        seconds = max((created.start_at - datetime.now(UTC)).total_seconds(), 0.0)
        due = f", next token in {seconds:.1f} s"
    return f"rate limited by {', '.join(pairs)}{due}"


def event_summary(event: EventKind) -> str:
    """One line about an event, for a timeline (its kind and seq are shown apart)."""
    if isinstance(event, (StepCreated,)):
        return f"step {event.step} {event.name}"
    if isinstance(event, (StepStarted, StepCompleted)):
        return f"step {event.step} attempt {event.attempt}"
    if isinstance(event, (StepRetrying, StepFailed)):
        error = f"{event.error.type}: {event.error.message}"
        return f"step {event.step} attempt {event.attempt}: {error}"
    if isinstance(event, StepDiscarded):
        return f"step {event.step} attempt {event.attempt} ({event.outcome})"
    if isinstance(event, AttributeSet):
        unique = f" unique gen {event.generation}" if event.unique else ""
        scope = f" (step {event.step})" if event.step is not None else ""
        return f"{event.key}={format_value(event.value)}{unique}{scope}"
    if isinstance(event, AttributeConflict):
        return f"{event.key}={format_value(event.value)} held by {event.holder_run_id}"
    if isinstance(event, (WaitCreated,)):
        return f"timer {event.wait} until {event.until.isoformat()}"
    if isinstance(event, WaitCompleted):
        return f"timer {event.wait}"
    if isinstance(event, (HookCreated, HookConflict)):
        return f"hook {event.hook} token {event.token}"
    if isinstance(event, HookReceived):
        return f"hook {event.hook}"
    if isinstance(event, RunFailed):
        return f"{event.error.type}: {event.error.message}"
    if isinstance(event, RunCancelled):
        return event.reason or ""
    if isinstance(event, RunContinued):
        return f"next run {event.next_run_id}"
    if isinstance(event, ChildStarted):
        return f"child {event.child} {event.workflow} {event.run_id}"
    if isinstance(event, ChildConflict):
        pair = f"{event.key}={format_value(event.value)}"
        return f"child {event.child}: {pair} held by {event.holder_run_id}"
    if isinstance(event, ChildClosed):
        return f"child {event.run_id} {event.status.value}"
    if isinstance(event, PatchMarker):
        return f"patched {event.name}"
    if isinstance(event, StreamWritten):
        return f"stream {event.name}"
    if isinstance(event, StreamClosed):
        return f"stream {event.name} closed"
    if isinstance(event, SlotRequested):
        got = "acquired" if event.acquired else "waiting"
        pair = f"{event.key}={format_value(event.value)}"
        return f"hold {event.hold} {pair} limit {event.limit}: {got}"
    if isinstance(event, SlotAcquired):
        return f"hold {event.hold} acquired"
    if isinstance(event, SlotReleased):
        return f"hold {event.hold} released"
    if isinstance(event, RunReopened):
        steps = ", ".join(str(n) for n in event.steps)
        return f"reopened by {event.by}" + (f" (steps {steps} again)" if steps else "")
    if isinstance(event, RunForked):
        return f"forked from {event.source_run_id} at step {event.from_step} by {event.by}"
    if isinstance(event, UpdateReceived):
        return f"update {event.name} id {event.update_id}"
    if isinstance(event, UpdateReplied):
        return f"replied to update {event.update_id}"
    if isinstance(event, UpdateRejected):
        return f"rejected update {event.update_id}: {event.message}"
    return ""
