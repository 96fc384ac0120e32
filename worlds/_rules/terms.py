"""Index terms: the canonical text of an attribute value, and query matching."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from worlds.query import And, AttrRef, Compare, Expr, RunQuery, check
from worlds.types import AttributeValue, RunRecord

__all__ = ["SELECTIVITY_CAP", "index_terms", "index_value", "matches", "most_selective_first"]

SELECTIVITY_CAP = 1000
"""How far a world counts each attribute filter's matches to choose the one to scan.

With several ``attribute = value`` filters, a world with an attribute index
scans the filter with the fewest matching runs (newest first) and probes the
others for each run it meets: scanning a filter with ``n`` matches costs at
most ``n`` index rows, whatever the filters' order in the query. Matches are
counted through the index up to this many, so choosing costs at most this
many index rows per filter; filters that reach it, or tie, keep the query's
order (``most_selective_first``). The SQLite world counts; PostgreSQL's
planner already orders the filters by its per-value statistics, and counting
there cost more than it saved (``benchmarks/search.py``).
"""


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


def most_selective_first(
    attributes: dict[str, AttributeValue], counts: Sequence[int]
) -> dict[str, AttributeValue]:
    """``attributes`` reordered by their ``counts`` of matching runs (each counted
    up to ``SELECTIVITY_CAP``), fewest first; ties keep their order."""
    if len(counts) != len(attributes):
        raise ValueError(f"{len(counts)} counts for {len(attributes)} attribute filters")
    order = sorted(
        range(len(counts)), key=lambda index: (min(counts[index], SELECTIVITY_CAP), index)
    )
    pairs = list(attributes.items())
    return dict(pairs[index] for index in order)


def index_terms(
    attributes: dict[str, Any],
    where: Expr,
    *,
    indexable: Callable[[str, Any], bool] = lambda key, value: True,
) -> tuple[dict[str, Any], Expr | None]:
    """Move ``where``'s top-level ``attribute = value`` terms into ``attributes``.

    A world's attribute index serves those terms better than the filter
    compiler does. A key already in ``attributes`` stays a filter term, and so
    does a pair the world's ``indexable(key, value)`` refuses. Returns the
    merged attributes and what is left of ``where`` (``None``: nothing).

    Raises:
        ValueError: ``where`` is not a well-formed filter.
    """
    check(where)
    merged = dict(attributes)
    rest: list[Expr] = []
    for term in where.items if isinstance(where, And) else (where,):
        if (
            isinstance(term, Compare)
            and term.op == "="
            and isinstance(term.left, AttrRef)
            and term.left.key not in merged
            and indexable(term.left.key, term.value)
        ):
            merged[term.left.key] = term.value
        else:
            rest.append(term)
    remaining = None if not rest else rest[0] if len(rest) == 1 else And(tuple(rest))
    return merged, remaining
