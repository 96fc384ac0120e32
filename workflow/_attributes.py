"""The attribute rules (BRIEF section 4), checked before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from workflow._spans import span_seconds
from workflow.types import Limited, RateLimited, Unique
from worlds.quoting import quoted
from worlds.types import AttributeValue, Limit, Rate, ReuseWindow, RunStatus

__all__ = [
    "IDEMPOTENCY_KEY",
    "MAX_ATTRIBUTES",
    "MAX_INT",
    "MIN_INT",
    "NAME_KEY",
    "SCHEDULED_AT_KEY",
    "SCHEDULE_KEY",
    "SCHEDULE_KEYS",
    "StartAttributes",
    "check_count",
    "check_pair",
    "check_priority",
    "check_settable",
    "check_text",
    "check_token",
    "reuse_window",
    "split_rates",
    "split_start_attributes",
]

MAX_KEY_LENGTH = 256
MAX_VALUE_BYTES = 256
MAX_ATTRIBUTES = 64
NAME_KEY = "$name"
IDEMPOTENCY_KEY = "$idempotency_key"
SCHEDULE_KEY = "$schedule"
SCHEDULED_AT_KEY = "$scheduled_at"
SCHEDULE_KEYS = frozenset({SCHEDULE_KEY, SCHEDULED_AT_KEY})
"""Set by schedules on the runs they start (``workflow.schedules``), by nothing else."""
RESERVED_KEYS = frozenset({NAME_KEY, IDEMPOTENCY_KEY}) | SCHEDULE_KEYS
ALWAYS_UNIQUE = frozenset({NAME_KEY, IDEMPOTENCY_KEY})
_NAME_PATTERN = re.compile(r"[A-Za-z0-9._:\-]{1,191}")


MIN_INT = -(2**63)
MAX_INT = 2**63 - 1
"""Integers are signed 64-bit: what SQLite, PostgreSQL and MessagePack all hold."""


def check_text(what: str, text: str) -> str:
    """``text`` as a plain ``str`` if every world can store it, else raise ``ValueError``."""
    text = str.__str__(text)  # a str subclass (StrEnum, ...) is stored as its plain text
    if "\x00" in text:
        raise ValueError(f"{what} contains a NUL character, which no world can store")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"{what} is not valid Unicode text (it holds a lone surrogate), "
            "which no world can store"
        ) from None
    return text


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid attribute key, else raise."""
    if not isinstance(key, str):
        raise TypeError(f"attribute keys are str, not {type(key).__name__}")
    key = check_text(f"attribute key {quoted(key)}", key)
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise ValueError(f"attribute key must be 1-{MAX_KEY_LENGTH} characters, got {len(key)}")
    if key.startswith("$") and key not in RESERVED_KEYS:
        raise ValueError(
            f"attribute keys starting with '$' are reserved; {quoted(key)} is not one of "
            f"{sorted(RESERVED_KEYS)}"
        )
    return key


def check_value(key: str, value: object) -> AttributeValue:
    """Return ``value`` as it will be stored under ``key``, or raise.

    The one rule set of RFC 0003, the same for every world: subclasses of
    ``str``, ``int`` and ``float`` (enums, say) are stored as the plain value,
    and ``-0.0`` as ``0.0``.
    """
    checked: AttributeValue
    if value is None or isinstance(value, bool):
        checked = value
    elif isinstance(value, int):
        checked = int.__index__(value)
        if not MIN_INT <= checked <= MAX_INT:
            raise ValueError(
                f"attribute {quoted(key)}: int values are signed 64-bit "
                f"({MIN_INT} to {MAX_INT}), got {checked}"
            )
    elif isinstance(value, float):
        checked = float(value) + 0.0  # + 0.0 turns -0.0 into 0.0
        if not math.isfinite(checked):
            raise ValueError(
                f"attribute {quoted(key)}: float values are finite; {quoted(checked)} cannot be "
                "indexed or compared"
            )
    elif isinstance(value, str):
        checked = check_text(f"attribute {quoted(key)}", value)
        if len(checked.encode("utf-8")) > MAX_VALUE_BYTES:
            raise ValueError(
                f"attribute {quoted(key)}: str values are at most {MAX_VALUE_BYTES} UTF-8 bytes"
            )
    elif isinstance(value, datetime):
        checked = _instant(key, value)
    else:
        raise TypeError(
            f"attribute {quoted(key)}: values are str, int, float, bool, None or datetime "
            f"(no nesting), not {type(value).__name__}"
        )
    if key == NAME_KEY and not (isinstance(checked, str) and _NAME_PATTERN.fullmatch(checked)):
        raise ValueError(
            "attribute '$name' must be 1-191 characters of letters, digits, '.', '_', '-', ':'"
        )
    if key == IDEMPOTENCY_KEY and not isinstance(checked, str):
        raise TypeError("attribute '$idempotency_key' must be a str")
    if key == SCHEDULE_KEY and not isinstance(checked, str):
        raise TypeError("attribute '$schedule' must be a str (a schedule id)")
    if key == SCHEDULED_AT_KEY and not isinstance(checked, datetime):
        raise TypeError("attribute '$scheduled_at' must be a datetime (a fire time)")
    return checked


def _instant(key: str, value: datetime) -> datetime:
    """``value`` as a plain aware ``datetime`` whose UTC instant is representable."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"attribute {quoted(key)}: datetime values must be timezone-aware")
    try:
        value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"attribute {quoted(key)}: {value.isoformat()} is outside the years 1-9999 in UTC"
        ) from None
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo,
        fold=value.fold,
    )


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


def check_settable(key: object, value: object) -> tuple[str, AttributeValue]:
    """``check_pair`` for a pair user code sets, which may not be a schedule's own."""
    if key in SCHEDULE_KEYS:
        raise ValueError(
            f"attribute {quoted(key)} is set only by schedules on the runs they start; "
            "use workflow.schedules.create_schedule to start runs on a schedule"
        )
    return check_pair(key, value)


def check_count(count: int, holder: str = "a run") -> None:
    """Refuse more than ``MAX_ATTRIBUTES`` attributes on ``holder`` (a run, a step attempt)."""
    if count > MAX_ATTRIBUTES:
        raise ValueError(
            f"{holder} has at most {MAX_ATTRIBUTES} attributes, this one would have {count}"
        )


_RELEASE_STATUSES = ("completed", "failed", "cancelled")


def reuse_window(
    ttl: float | timedelta | None, release_on: Collection[str] | None
) -> ReuseWindow | None:
    """The ``ReuseWindow`` of a unique claim, checked (``None`` without one)."""
    seconds = None if ttl is None else span_seconds("ttl", ttl)
    statuses: frozenset[RunStatus] = frozenset()
    if release_on:
        if isinstance(release_on, str):
            raise TypeError("release_on is a collection of statuses, e.g. {'failed'}")
        wrong = sorted(str(s) for s in release_on if str(s) not in _RELEASE_STATUSES)
        if wrong:
            raise ValueError(
                f"release_on may name {list(_RELEASE_STATUSES)} (how the holder closed), "
                f"not {wrong}"
            )
        statuses = frozenset(RunStatus(str(s)) for s in release_on)
    if seconds is None and not statuses:
        return None
    return ReuseWindow(ttl=seconds, release_on=statuses)


class StartAttributes(NamedTuple):
    """``start``'s attributes, checked: values, unique keys, limits and reuse windows."""

    values: dict[str, AttributeValue]
    unique: frozenset[str]
    limits: dict[str, Limit]
    windows: dict[str, ReuseWindow]


def split_start_attributes(attributes: Mapping[str, Any] | None) -> StartAttributes:
    """Validate ``start``'s attributes; return plain values, the unique keys and the limits."""
    if attributes is None:
        return StartAttributes({}, frozenset(), {}, {})
    if not isinstance(attributes, Mapping):
        raise TypeError(f"attributes must be a mapping, not {type(attributes).__name__}")
    values: dict[str, AttributeValue] = {}
    unique: set[str] = set()
    limits: dict[str, Limit] = {}
    windows: dict[str, ReuseWindow] = {}
    for key, raw in attributes.items():
        if isinstance(raw, RateLimited):
            raise ValueError(
                f"attribute {quoted(key)}: RateLimited values are taken by start() only (not "
                "yet by child runs, start policies or schedules)"
            )
        is_unique = isinstance(raw, Unique)
        key, value = check_settable(key, raw.value if isinstance(raw, Unique | Limited) else raw)
        values[key] = value
        if isinstance(raw, Limited):
            if key in ALWAYS_UNIQUE:
                raise ValueError(f"attribute {quoted(key)} is always unique; it cannot be Limited")
            limits[key] = Limit(limit=raw.limit, on_full=raw.on_full, burst=raw.burst)
        elif is_unique or key in ALWAYS_UNIQUE:
            unique.add(key)
            if isinstance(raw, Unique):
                window = reuse_window(raw.ttl, raw.release_on)
                if window is not None:
                    windows[key] = window
    check_count(len(values))
    return StartAttributes(values, frozenset(unique), limits, windows)


def split_rates(
    attributes: Mapping[str, Any] | None,
) -> tuple[Mapping[str, Any] | None, dict[str, Rate]]:
    """``start``'s attributes with each ``RateLimited`` value replaced by its plain
    value, and the rate of each such key (its key checked by ``check_settable``)."""
    if attributes is None or not isinstance(attributes, Mapping):
        return attributes, {}
    rates: dict[str, Rate] = {}
    plain: dict[Any, Any] = {}
    for key, raw in attributes.items():
        if isinstance(raw, RateLimited):
            checked, _ = check_settable(key, raw.value)
            if checked in ALWAYS_UNIQUE:
                raise ValueError(
                    f"attribute {quoted(checked)} is always unique; it cannot be RateLimited"
                )
            rates[checked] = Rate(limit=raw.limit, per=raw.seconds, on_full=raw.on_full)
            plain[key] = raw.value
        else:
            plain[key] = raw
    return (plain if rates else attributes), rates


def check_priority(priority: object) -> int:
    """``priority`` if it is a signed 32-bit int (``bool`` excluded), else raise."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority is an int, not {type(priority).__name__}")
    if not -(2**31) <= priority < 2**31:
        raise ValueError(f"priority must be -2147483648 to 2147483647, got {priority}")
    return int(priority)
