"""Index terms: the canonical text of an attribute value, and query matching."""

from __future__ import annotations

from datetime import UTC, datetime

from worlds.types import AttributeValue, RunQuery, RunRecord

__all__ = ["index_value", "matches"]


def index_value(value: AttributeValue) -> str:
    """The canonical text of an attribute value, used as its index and claim key.

    The type is part of the text, so ``1``, ``1.0``, ``True`` and ``"1"`` are
    four different values, and datetimes compare as UTC instants.
    """
    if value is None:
        return "n:"
    if isinstance(value, bool):
        return "b:1" if value else "b:0"
    if isinstance(value, int):
        return f"i:{value}"
    if isinstance(value, float):
        return f"f:{value!r}"
    if isinstance(value, str):
        return f"s:{value}"
    if isinstance(value, datetime):
        return f"t:{value.astimezone(UTC).isoformat()}"
    raise TypeError(f"not an attribute value: {type(value).__name__}")


def matches(run: RunRecord, query: RunQuery) -> bool:
    """Whether ``run`` passes every filter of ``query`` (cursor excluded)."""
    if query.workflow is not None and run.workflow != query.workflow:
        return False
    if query.statuses is not None and run.status not in query.statuses:
        return False
    if query.created_after is not None and run.created_at < query.created_after:
        return False
    if query.created_before is not None and run.created_at >= query.created_before:
        return False
    for key, value in query.attributes.items():
        if key not in run.attributes or index_value(run.attributes[key]) != index_value(value):
            return False
    return True
