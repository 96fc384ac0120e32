"""How the CLI prints: rich tables for people, JSON for scripts, progress on stderr.

JSON goes to stdout untouched by rich, one document per command; tables,
progress and errors never mix into it (progress and errors go to stderr).

User data (attribute keys and values, workflow names, errors, payloads) is
printed as stored, made safe: never read as Rich markup (cells are ``Text``,
strings are escaped) and with control, format and surrogate characters shown
as escapes (``\x1b``, ``\u202e``; ``workflow.shown``, the rule the web UI and
its JSON API follow too), so no stored value can drive the terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from workflow.shown import json_dumps, visible
from workflow.views import (
    decode_payload,
    event_to_json,
    format_age,
    format_duration,
    format_value,
    run_to_json,
    to_builtins,
)
from worlds.types import RunRecord, RunStatus

__all__ = [
    "attributes_text",
    "console",
    "decode_payload",
    "err_console",
    "event_to_json",
    "format_age",
    "format_duration",
    "format_value",
    "json_text",
    "markup_safe",
    "print_json",
    "progress",
    "run_to_json",
    "runs_table",
    "status_text",
    "text",
    "visible",
]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

_STATUS_STYLES = {
    RunStatus.PENDING: "yellow",
    RunStatus.RUNNING: "cyan",
    RunStatus.COMPLETED: "green",
    RunStatus.FAILED: "bold red",
    RunStatus.CANCELLED: "magenta",
    RunStatus.CONTINUED: "blue",
}


def markup_safe(value: object, *, keep_newlines: bool = False) -> str:
    """``visible(value)`` escaped for Rich markup, to embed in a markup string."""
    return escape(visible(value, keep_newlines=keep_newlines))


def text(value: object, style: str = "") -> Text:
    """A table cell or line holding ``visible(value)``, never read as markup."""
    return Text(visible(value), style=style)


def json_text(value: Any) -> str:
    """``value`` as indented JSON, non-ASCII kept but unsafe characters as ``\\uXXXX``
    (``workflow.shown.json_dumps``, as the web UI's JSON API writes it).

    Valid JSON that decodes to exactly ``value``; no raw control, bidi or lone
    surrogate character reaches the terminal.
    """
    return json_dumps(to_builtins(value), indent=2)


def print_json(value: Any) -> None:
    """Write ``value`` as indented JSON to stdout."""
    sys.stdout.write(json_text(value) + "\n")
    sys.stdout.flush()


def status_text(status: RunStatus) -> Text:
    """A status, coloured."""
    return Text(status.value, style=_STATUS_STYLES.get(status, ""))


def attributes_text(attributes: Mapping[str, Any]) -> str:
    """``k=v k2=v2`` for a table cell."""
    return " ".join(f"{key}={format_value(value)}" for key, value in sorted(attributes.items()))


def runs_table(records: Iterable[RunRecord], *, title: str | None = None) -> Table:
    """The runs table: id, workflow, status, age, attributes."""
    table = Table(title=title, box=None, pad_edge=False, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("WORKFLOW", no_wrap=True)
    table.add_column("STATUS", no_wrap=True)
    table.add_column("AGE", justify="right", no_wrap=True)
    table.add_column("ATTRIBUTES", overflow="fold")
    now = datetime.now(UTC)
    for record in records:
        table.add_row(
            text(record.id),
            text(record.workflow),
            status_text(record.status),
            format_age(record.created_at, now),
            text(attributes_text(record.attributes)),
        )
    return table


def progress() -> Progress:
    """A transient spinner with a counter, on stderr."""
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        TextColumn("{task.completed} done"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
