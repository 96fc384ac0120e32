"""The attribute rules (BRIEF section 4), checked before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from workflow.types import Unique
from worlds.types import AttributeValue

__all__ = [
    "IDEMPOTENCY_KEY",
    "MAX_ATTRIBUTES",
    "NAME_KEY",
    "check_count",
    "check_pair",
    "check_token",
    "split_start_attributes",
]

MAX_KEY_LENGTH = 256
MAX_VALUE_BYTES = 256
MAX_ATTRIBUTES = 64
NAME_KEY = "$name"
IDEMPOTENCY_KEY = "$idempotency_key"
RESERVED_KEYS = frozenset({NAME_KEY, IDEMPOTENCY_KEY})
ALWAYS_UNIQUE = RESERVED_KEYS
_NAME_PATTERN = re.compile(r"[A-Za-z0-9._:\-]{1,191}")


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid attribute key, else raise."""
    if not isinstance(key, str):
        raise TypeError(f"attribute keys are str, not {type(key).__name__}")
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValueError(f"attribute key must be 1-{MAX_KEY_LENGTH} characters, got {len(key)}")
    if key.startswith("$") and key not in RESERVED_KEYS:
        raise ValueError(
            f"attribute keys starting with '$' are reserved; {key!r} is not one of "
            f"{sorted(RESERVED_KEYS)}"
        )
    return key


def check_value(key: str, value: object) -> AttributeValue:
    """Return ``value`` if it may be stored under ``key``, else raise."""
    if value is None or isinstance(value, (bool, int)):
        pass
    elif isinstance(value, float):
        if math.isnan(value):
            raise ValueError(f"attribute {key!r}: NaN cannot be indexed or compared")
    elif isinstance(value, str):
        if len(value.encode("utf-8")) > MAX_VALUE_BYTES:
            raise ValueError(
                f"attribute {key!r}: str values are at most {MAX_VALUE_BYTES} UTF-8 bytes"
            )
    elif isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"attribute {key!r}: datetime values must be timezone-aware")
    else:
        raise TypeError(
            f"attribute {key!r}: values are str, int, float, bool, None or datetime "
            f"(no nesting), not {type(value).__name__}"
        )
    if key == NAME_KEY and not (isinstance(value, str) and _NAME_PATTERN.fullmatch(value)):
        raise ValueError(
            "attribute '$name' must be 1-191 characters of letters, digits, '.', '_', '-', ':'"
        )
    if key == IDEMPOTENCY_KEY and not isinstance(value, str):
        raise TypeError("attribute '$idempotency_key' must be a str")
    return value


_TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._:\-]{1,256}")


def check_token(token: object) -> str:
    """Return ``token`` if it may name a hook (it appears in URLs and shells)."""
    if not isinstance(token, str):
        raise TypeError(f"hook tokens are str, not {type(token).__name__}")
    if not _TOKEN_PATTERN.fullmatch(token):
        raise ValueError("a hook token is 1-256 characters of letters, digits, '.', '_', '-', ':'")
    return token


def check_pair(key: object, value: object) -> tuple[str, AttributeValue]:
    """Validate one (key, value) pair."""
    checked = check_key(key)
    return checked, check_value(checked, value)


def check_count(count: int) -> None:
    """Refuse a run with more than ``MAX_ATTRIBUTES`` attributes."""
    if count > MAX_ATTRIBUTES:
        raise ValueError(
            f"a run has at most {MAX_ATTRIBUTES} attributes, this one would have {count}"
        )


def split_start_attributes(
    attributes: Mapping[str, Any] | None,
) -> tuple[dict[str, AttributeValue], frozenset[str]]:
    """Validate ``start``'s attributes; return plain values and the unique keys."""
    if attributes is None:
        return {}, frozenset()
    if not isinstance(attributes, Mapping):
        raise TypeError(f"attributes must be a mapping, not {type(attributes).__name__}")
    values: dict[str, AttributeValue] = {}
    unique: set[str] = set()
    for key, raw in attributes.items():
        is_unique = isinstance(raw, Unique)
        key, value = check_pair(key, raw.value if isinstance(raw, Unique) else raw)
        values[key] = value
        if is_unique or key in ALWAYS_UNIQUE:
            unique.add(key)
    check_count(len(values))
    return values, frozenset(unique)
