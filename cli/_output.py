"""How the CLI prints: rich tables for people, JSON for scripts, progress on stderr.

JSON goes to stdout untouched by rich, one document per command; tables,
progress and errors never mix into it (progress and errors go to stderr).

User data (attribute keys and values, workflow names, errors, payloads) is
printed as stored, made safe: never read as Rich markup (cells are ``Text``,
strings are escaped) and with control, format and surrogate characters shown
as escapes (``\x1b``, ``\u202e``), so no stored value can drive the terminal.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

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


_UNSAFE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories shown as escapes: controls, format (bidi), surrogates, separators."""


def _escape_char(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(value: object, *, keep_newlines: bool = False) -> str:
    """``str(value)`` with every control/format/surrogate character as an escape.

    ``"a\x1b[2Jb"`` becomes ``"a\\x1b[2Jb"``: what is stored, but inert on a
    terminal. With ``keep_newlines``, newlines are kept.
    """
    out = str(value)
    if out.isprintable():
        return out
    return "".join(
        _escape_char(char)
        if unicodedata.category(char) in _UNSAFE and not (keep_newlines and char == "\n")
        else char
        for char in out
    )


def markup_safe(value: object, *, keep_newlines: bool = False) -> str:
    """``visible(value)`` escaped for Rich markup, to embed in a markup string."""
    return escape(visible(value, keep_newlines=keep_newlines))


def text(value: object, style: str = "") -> Text:
    """A table cell or line holding ``visible(value)``, never read as markup."""
    return Text(visible(value), style=style)


def _json_escape(char: str) -> str:
    data = char.encode("utf-16-le", "surrogatepass")
    return "".join(
        f"\\u{int.from_bytes(data[i : i + 2], 'little'):04x}" for i in range(0, len(data), 2)
    )


def json_text(value: Any) -> str:
    """``value`` as indented JSON, non-ASCII kept but unsafe characters as ``\\uXXXX``.

    Valid JSON that decodes to exactly ``value``; no raw control, bidi or lone
    surrogate character reaches the terminal.
    """
    out = json.dumps(to_builtins(value), indent=2, ensure_ascii=False)
    if out.isprintable():
        return out
    return "".join(
        _json_escape(char) if char != "\n" and unicodedata.category(char) in _UNSAFE else char
        for char in out
    )


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
