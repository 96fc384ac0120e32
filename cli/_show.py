"""``wf runs show``: one run's status, attributes and claims, steps, hooks and timeline.

Everything is derived from the run record, its claims and its event log, read
through the public ``Run`` handle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.table import Table

from cli._output import (
    console,
    decode_payload,
    event_to_json,
    format_duration,
    format_value,
    markup_safe,
    run_to_json,
    status_text,
    text,
)
from workflow import Run
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
    RunFailed,
    RunForked,
    RunRecord,
    RunReopened,
    StepCompleted,
    StepCreated,
    StepDiscarded,
    StepFailed,
    StepRetrying,
    StepStarted,
    StreamWritten,
    WaitCompleted,
    WaitCreated,
)

__all__ = ["EVENTS_SHOWN", "Details", "EventWindow", "gather_details", "render_details"]

EVENTS_SHOWN = 20
"""By default ``wf runs show`` prints this many events from each end of a longer log."""
RESULT_SHOWN = 2000
"""Characters of a result ``wf runs show`` prints before truncating (``--json`` has all)."""


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
            ValueError: any other spelling.
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
                f"--events takes all, or a range of seqs like 100-200, 100- or -50; got {spec!r}"
            ) from None
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
class Details:
    """Everything ``wf runs show`` prints."""

    record: RunRecord
    claims: dict[str, Claim]
    events: list[EventKind]
    steps: list[StepSummary] = field(default_factory=list)
    hooks: list[HookSummary] = field(default_factory=list)
    window: EventWindow = field(default_factory=EventWindow)
    parent: str | None = None
    children: list[RunRecord] = field(default_factory=list)

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


async def gather_details(run: Run[Any], window: EventWindow | None = None) -> Details:
    """Read the run, its claims and its log, and fold steps and hooks from the log."""
    events = await run.events()
    record = run.record
    assert record is not None  # events() read the record first
    claims = {claim.key: claim for claim in await run.claims() if claim.step is None}
    parent = await run.parent()
    children = [child.record for child in await run.children() if child.record is not None]
    return Details(
        record,
        claims,
        events,
        _fold_steps(events),
        _fold_hooks(events),
        window or EventWindow(),
        None if parent is None else parent.id,
        children,
    )


def _summary(event: EventKind) -> str:
    """One line about an event, for the timeline."""
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
    if isinstance(event, RunReopened):
        steps = ", ".join(str(n) for n in event.steps)
        return f"reopened by {event.by}" + (f" (steps {steps} again)" if steps else "")
    if isinstance(event, RunForked):
        return f"forked from {event.source_run_id} at step {event.from_step} by {event.by}"
    return ""


def _result_text(data: bytes) -> str:
    shown = json.dumps(decode_payload(data), ensure_ascii=False, default=str)
    if len(shown) > RESULT_SHOWN:
        more = len(shown) - RESULT_SHOWN
        shown = f"{shown[:RESULT_SHOWN]}… ({more} more characters; --json prints it all)"
    return shown


def render_details(details: Details) -> None:
    """Print ``details`` for a person."""
    record = details.record
    head = f"[bold]run[/] {record.id}  [bold]workflow[/] {markup_safe(record.workflow)}  "
    console.print(head, end="")
    console.print(status_text(record.status))
    console.print(
        f"created {record.created_at.isoformat()}"
        + (f"  closed {record.closed_at.isoformat()}" if record.closed_at else "")
    )
    if record.error is not None:
        console.print(
            f"[red]error[/] {markup_safe(record.error.type)}: {markup_safe(record.error.message)}"
        )
    if record.result is not None:
        console.print(f"[bold]result[/] {markup_safe(_result_text(record.result))}")

    attributes = Table(title="attributes", box=None, header_style="bold", title_justify="left")
    for column in ("KEY", "VALUE", "CLAIM"):
        attributes.add_column(column)
    for key, value in sorted(record.attributes.items()):
        claim = details.claims.get(key)
        held = f"unique, generation {claim.generation}" if claim else ""
        attributes.add_row(text(key), text(format_value(value)), held)
    console.print(attributes if record.attributes else "[dim]no attributes[/]")

    if details.steps:
        steps = Table(title="steps", box=None, header_style="bold", title_justify="left")
        for column in ("#", "NAME", "STATUS", "ATTEMPTS", "DURATION", "ERROR"):
            steps.add_column(column)
        for step in details.steps:
            took = step.duration()
            steps.add_row(
                str(step.number),
                text(step.name),
                text(step.status),
                str(step.attempts),
                "-" if took is None else format_duration(took),
                text(step.error or ""),
            )
        console.print(steps)
    if details.parent is not None:
        console.print(f"[bold]parent[/] {details.parent}")
    if details.children:
        children = Table(title="children", box=None, header_style="bold", title_justify="left")
        for column in ("RUN", "WORKFLOW", "STATUS"):
            children.add_column(column)
        for child in details.children:
            children.add_row(child.id, text(child.workflow), status_text(child.status))
        console.print(children)
    if details.hooks:
        hooks = Table(title="hooks", box=None, header_style="bold", title_justify="left")
        for column in ("#", "TOKEN", "STATUS"):
            hooks.add_column(column)
        for hook in details.hooks:
            hooks.add_row(str(hook.number), text(hook.token), text(hook.status))
        console.print(hooks)

    shown, omitted = details.window.select(details.events)
    title = f"timeline ({len(shown)} of {len(details.events)} events)"
    timeline = Table(title=title, box=None, header_style="bold", title_justify="left")
    for column in ("SEQ", "AT", "EVENT", ""):
        timeline.add_column(column)
    start = record.created_at
    for event in shown:
        if omitted is not None and event.seq == omitted[1] + 1:
            timeline.add_row("…", "", f"{omitted[1] - omitted[0] + 1} events not shown", "")
        offset = (event.at - start).total_seconds() if event.at >= start else 0.0
        timeline.add_row(
            str(event.seq),
            f"+{format_duration(offset)}",
            str(type(event).__struct_config__.tag),
            text(_summary(event)),
        )
    console.print(timeline)
    if omitted is not None:
        console.print(
            f"[dim]events {omitted[0]}-{omitted[1]} not shown: --events all, or a range "
            f"like --events {omitted[0]}-{min(omitted[1], omitted[0] + 99)}[/]"
        )
