"""How an error message shows what the user passed: quoted, and cut when oversized.

Every message that echoes user input (a key, a value, a name, a token, an
option's text) shows it through ``quoted``, so a 5,000-character stream name
is a short prefix and an ellipsis, never a screenful. It lives in ``worlds``,
the lowest layer, so the worlds' own rules, the SDK and ``wf`` share it.
"""

from __future__ import annotations

__all__ = ["SHOWN_CHARACTERS", "quoted"]

SHOWN_CHARACTERS = 80
"""The longest ``repr`` of an input an error message shows whole."""


def quoted(value: object, limit: int = SHOWN_CHARACTERS) -> str:
    """``repr(value)``, or, past ``limit`` characters, its prefix, ``…`` and the full size.

    ``quoted("abc")`` is ``'abc'``; ``quoted("x" * 5000)`` is ``'xxx…xxx'… (5000
    characters)`` with about ``limit`` characters of the string shown. A string is
    cut before it is quoted, so the shown part is still a valid quoted prefix.
    """
    shown = repr(value)
    if len(shown) <= limit:
        return shown
    if isinstance(value, str):
        cut = max(1, limit - 2)
        while cut > 1 and len(repr(value[:cut])) > limit:  # escapes make the repr longer
            cut = max(1, min(cut - 1, cut * limit // len(repr(value[:cut]))))
        return f"{value[:cut]!r}… ({len(value)} characters)"
    return f"{shown[:limit]}… ({len(shown)} characters as text)"
