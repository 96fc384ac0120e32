"""Stored text made safe to show: one rule for ``wf``, the web UI and its JSON API.

Attribute keys and values, workflow names, errors and payloads are shown as
stored, except the characters that would act instead of being read: controls
(``\\x1b`` drives a terminal), format characters (``\\u202e`` and the other
bidi overrides reorder what follows, ``\\u200b`` hides in plain sight),
surrogates and line or paragraph separators. Each is shown as its escape, so
``"invoice\\u202etxt.exe"`` reads ``invoice\\u202etxt.exe`` everywhere.

- ``visible(value)``: the text for a terminal or a web page.
- ``json_dumps(data)``: JSON whose string values keep every character, with
  those same characters written as ``\\uXXXX`` escapes: it decodes to exactly
  ``data``, and no raw control or bidi character is in the document.

::

    from workflow.shown import json_dumps, visible

    visible("a\\u202eb")        # 'a\\\\u202eb'
    json_dumps({"k": "a\\u202eb"})  # '{"k": "a\\\\u202eb"}'
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

__all__ = ["UNSAFE_CATEGORIES", "json_dumps", "visible"]

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode categories shown as escapes: controls, format (bidi), surrogates, separators."""


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(char: str) -> str:
    data = char.encode("utf-16-le", "surrogatepass")
    return "".join(
        f"\\u{int.from_bytes(data[i : i + 2], 'little'):04x}" for i in range(0, len(data), 2)
    )


def visible(value: object, *, keep_newlines: bool = False) -> str:
    """``str(value)`` with every control, format, surrogate and separator character
    as an escape (``\\x1b``, ``\\u202e``); with ``keep_newlines``, ``\\n`` stays.

    Args:
        value: anything; its ``str`` is shown.
        keep_newlines: keep line breaks, for text shown over several lines.

    Returns:
        What is stored, but inert on a terminal or in a page.
    """
    out = str(value)
    if out.isprintable():
        return out
    return "".join(
        _escape(char)
        if unicodedata.category(char) in UNSAFE_CATEGORIES and not (keep_newlines and char == "\n")
        else char
        for char in out
    )


def json_dumps(data: Any, *, indent: int | None = None) -> str:
    """``data`` (JSON-ready builtins) as JSON, non-ASCII kept, unsafe characters as
    ``\\uXXXX``.

    Args:
        data: dicts, lists, strings, numbers, booleans and ``None``.
        indent: as for ``json.dumps``; ``None`` for one line.

    Returns:
        Valid JSON that decodes to exactly ``data``.
    """
    separators = None if indent is not None else (",", ":")
    out = json.dumps(data, indent=indent, ensure_ascii=False, separators=separators)
    if out.isprintable() or (indent is not None and out.replace("\n", "").isprintable()):
        return out
    # outside strings JSON has only ASCII punctuation and the indent's newlines
    return "".join(
        _json_escape(char)
        if char != "\n" and unicodedata.category(char) in UNSAFE_CATEGORIES
        else char
        for char in out
    )
