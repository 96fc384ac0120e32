"""``wf runs show``: one run's status, attributes and claims, steps, hooks and timeline.

Everything is derived from the run record, its claims and its event log, read
through the public ``Run`` handle.
"""

from __future__ import annotations

import json

from rich.table import Table

from workflow.views import EVENTS_SHOWN, EventWindow, gather_details
from workflow.views import RunDetails as Details
from workflow.views import event_summary as _summary

from ._output import (
    console,
    decode_payload,
    format_duration,
    format_value,
    markup_safe,
    status_text,
    text,
)

__all__ = ["EVENTS_SHOWN", "Details", "EventWindow", "gather_details", "render_details"]

RESULT_SHOWN = 2000
"""Characters of a result ``wf runs show`` prints before truncating (``--json`` has all)."""


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
    if details.priority:
        console.print(f"[bold]priority[/] {details.priority}")
    note = details.start_note()
    if note is not None:
        console.print(f"[yellow]{markup_safe(note)}[/]")
    for wait in details.waiting:
        console.print(f"[yellow]{markup_safe(wait.reason())}[/]")

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
