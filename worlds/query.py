"""The run filter language as data: expression nodes, their rules, and an evaluator.

A filter is a tree of msgspec structs; ``RunQuery`` carries one (``where``)
with the simple filters of ``World.list_runs``, and ``RunPage`` is its answer.
``workflow.query.parse`` builds one from text (``status = 'failed' AND
customer = 'c-9'``) and ``workflow.query.format`` prints it back; worlds
receive it as ``RunQuery.where``. A world either compiles the tree into its
own query language with bound parameters (never by pasting values into text),
evaluates it in Python with ``matches``, or raises ``NotImplementedError``
naming the part it cannot serve.

Semantics (every world must agree with ``matches``):

- A field is one of ``FIELDS``; anything else is an attribute key.
- Comparisons are two-valued: a comparison on a missing attribute, or on
  ``closed_at`` of an open run, is false, and ``NOT`` of it is true.
- ``=``, ``!=`` and ``IN`` on attributes compare typed values exactly, as the
  attribute index does: ``1``, ``1.0``, ``true`` and ``'1'`` are four values.
  ``!=`` needs the attribute to be present.
- ``<``, ``<=``, ``>``, ``>=`` order numbers with numbers (int and float mix;
  bools are not numbers), strings with strings (by code point) and datetimes
  with datetimes; an attribute of another type does not match.
- ``STARTS_WITH`` matches string values only. ``IS NULL`` is true when the
  attribute is absent or holds ``None`` (and when ``closed_at`` is unset).

This module imports only ``worlds.types``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeAlias

import msgspec

from worlds.types import RunRecord, RunStatus, StoredValue

__all__ = [
    "FIELDS",
    "MAX_DEPTH",
    "OPERATORS",
    "And",
    "AttrRef",
    "Compare",
    "CompareOp",
    "CountField",
    "Expr",
    "FieldName",
    "FieldRef",
    "In",
    "IsNull",
    "Not",
    "Operand",
    "Or",
    "RunCount",
    "RunPage",
    "RunQuery",
    "StartsWith",
    "check",
    "matches",
]

FieldName: TypeAlias = Literal["status", "workflow", "created_at", "closed_at", "id"]
CompareOp: TypeAlias = Literal["=", "!=", "<", "<=", ">", ">="]

FIELDS: frozenset[str] = frozenset({"status", "workflow", "created_at", "closed_at", "id"})
"""The run fields a filter can name; any other name is an attribute key."""
TIME_FIELDS: frozenset[str] = frozenset({"created_at", "closed_at"})
OPERATORS: tuple[CompareOp, ...] = ("=", "!=", "<", "<=", ">", ">=")
ORDERING: frozenset[str] = frozenset({"<", "<=", ">", ">="})
MAX_DEPTH = 64
"""The deepest nesting of ``AND``/``OR``/``NOT`` a filter may have."""
MAX_TERMS = 500
"""The most comparisons one filter may hold."""


class FieldRef(msgspec.Struct, frozen=True, tag="field"):
    """A run field: ``status``, ``workflow``, ``created_at``, ``closed_at`` or ``id``."""

    name: FieldName


class AttrRef(msgspec.Struct, frozen=True, tag="attribute"):
    """A run attribute, by key."""

    key: str


Operand: TypeAlias = FieldRef | AttrRef


class Compare(msgspec.Struct, frozen=True, tag="compare"):
    """``left op value``; ``value`` is an attribute value (datetimes for time fields)."""

    left: Operand
    op: CompareOp
    value: StoredValue


class In(msgspec.Struct, frozen=True, tag="in"):
    """``left IN (values...)``: equal to one of ``values`` (at least one)."""

    left: Operand
    values: tuple[StoredValue, ...]


class StartsWith(msgspec.Struct, frozen=True, tag="starts_with"):
    """``left STARTS_WITH prefix``: a string that begins with ``prefix``."""

    left: Operand
    prefix: str


class IsNull(msgspec.Struct, frozen=True, tag="is_null"):
    """``left IS NULL`` (or ``IS NOT NULL`` when ``negated``)."""

    left: Operand
    negated: bool = False


class And(msgspec.Struct, frozen=True, tag="and"):
    """Every item holds (at least two items)."""

    items: tuple[Expr, ...]


class Or(msgspec.Struct, frozen=True, tag="or"):
    """Some item holds (at least two items)."""

    items: tuple[Expr, ...]


class Not(msgspec.Struct, frozen=True, tag="not"):
    """``item`` does not hold."""

    item: Expr


Expr: TypeAlias = Compare | In | StartsWith | IsNull | And | Or | Not
"""Any filter expression."""


class RunQuery(msgspec.Struct, frozen=True, kw_only=True):
    """A filter over runs; every given field must match. Newest runs first.

    ``where`` is a filter expression (``worlds.query``) ANDed with the other
    fields. A world serves it with the semantics of ``worlds.query.matches``,
    or raises ``NotImplementedError`` naming what it cannot serve.
    """

    workflow: str | None = None
    statuses: frozenset[RunStatus] | None = None
    attributes: dict[str, StoredValue] = {}
    created_after: datetime | None = None
    created_before: datetime | None = None
    limit: int = 100
    cursor: str | None = None
    where: Expr | None = None


CountField: TypeAlias = Literal["created", "closed"]
"""The time ``World.count_runs`` buckets runs by: ``created_at`` or ``closed_at``."""


class RunCount(msgspec.Struct, frozen=True, kw_only=True):
    """Of ``World.count_runs``: ``count`` runs of ``status`` fell in bucket ``bucket``
    (bucket ``n`` spans ``since + n * width`` to ``since + (n + 1) * width``)."""

    bucket: int
    status: RunStatus
    count: int


class RunPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of ``list_runs``; pass ``next_cursor`` back for the next one."""

    runs: tuple[RunRecord, ...]
    next_cursor: str | None = None


_STRING_FIELDS = frozenset({"status", "workflow", "id"})
_INT64 = (-(2**63), 2**63 - 1)


def _check_text(text: str) -> None:
    """Refuse text no world can bind as a parameter (a lone surrogate is not Unicode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} holds a lone surrogate, which is not Unicode text") from None


def _check_value(left: Operand, value: object, op: str) -> None:
    if isinstance(value, str):
        _check_text(value)
    if isinstance(left, FieldRef):
        if left.name in TIME_FIELDS:
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise ValueError(f"{left.name} compares with timezone-aware datetimes only")
        elif not isinstance(value, str):
            raise ValueError(f"{left.name} compares with strings only, not {value!r}")
        return
    if value is None or isinstance(value, (bool, str)):
        pass
    elif isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"integer {value} is out of the 64-bit range")
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} cannot be compared")
    elif isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("datetimes in filters must be timezone-aware")
    else:
        raise ValueError(f"not an attribute value: {value!r}")
    if op in ORDERING and (value is None or isinstance(value, bool)):
        raise ValueError(f"{op} cannot order {value!r}: only numbers, strings and datetimes")


def _check_operand(left: object) -> Operand:
    if isinstance(left, FieldRef):
        if left.name not in FIELDS:
            raise ValueError(f"unknown field {left.name!r}; fields are {sorted(FIELDS)}")
    elif isinstance(left, AttrRef):
        if not isinstance(left.key, str) or not 1 <= len(left.key) <= 256:
            raise ValueError("attribute keys are 1-256 characters")
        _check_text(left.key)
    else:
        raise ValueError(f"not a field or attribute: {left!r}")
    return left


def check(expr: Expr) -> None:
    """Raise ``ValueError`` unless ``expr`` is a well-formed filter.

    Well-formed: known fields, values of the right type for each operand,
    ``AND``/``OR`` of at least two items, at most ``MAX_DEPTH`` levels of
    nesting and ``MAX_TERMS`` comparisons. Trees from ``workflow.query.parse``
    always are; worlds call this before serving a tree built by hand.
    """
    terms = 0

    def visit(node: object, depth: int) -> None:
        nonlocal terms
        if depth > MAX_DEPTH:
            raise ValueError(f"filter nests deeper than {MAX_DEPTH} levels")
        if isinstance(node, (And, Or)):
            if len(node.items) < 2:
                raise ValueError(f"{type(node).__name__} needs at least two items")
            for item in node.items:
                visit(item, depth + 1)
            return
        if isinstance(node, Not):
            visit(node.item, depth + 1)
            return
        terms += 1
        if terms > MAX_TERMS:
            raise ValueError(f"filter has more than {MAX_TERMS} comparisons")
        if isinstance(node, Compare):
            left = _check_operand(node.left)
            if node.op not in OPERATORS:
                raise ValueError(f"unknown operator {node.op!r}")
            _check_value(left, node.value, node.op)
        elif isinstance(node, In):
            left = _check_operand(node.left)
            if not node.values:
                raise ValueError("IN needs at least one value")
            for value in node.values:
                _check_value(left, value, "=")
        elif isinstance(node, StartsWith):
            left = _check_operand(node.left)
            if not isinstance(node.prefix, str):
                raise ValueError("STARTS_WITH takes a string")
            _check_text(node.prefix)
            if isinstance(left, FieldRef) and left.name in TIME_FIELDS:
                raise ValueError(f"STARTS_WITH does not apply to {left.name}")
        elif isinstance(node, IsNull):
            left = _check_operand(node.left)
            if isinstance(left, FieldRef) and left.name != "closed_at":
                raise ValueError(f"{left.name} is never null; IS NULL applies to closed_at")
        else:
            raise ValueError(f"not a filter expression: {node!r}")

    visit(expr, 1)


# --------------------------------------------------------------------------- evaluation

_MISSING = object()


def _typed_key(value: object) -> tuple[str, object]:
    """Equality as the attribute index sees it: the type is part of the value."""
    if value is None:
        return ("n", None)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", repr(value))
    if isinstance(value, datetime):
        return ("t", value)
    return ("s", value)


def _kind(value: object) -> str | None:
    """The ordering family of a value: numbers, strings or datetimes."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "time"
    return None


def _ordered(left: object, op: str, right: object) -> bool:
    kind = _kind(left)
    if kind is None or kind != _kind(right):
        return False
    a: Any = left
    b: Any = right
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _operand(record: RunRecord, left: Operand) -> object:
    if isinstance(left, AttrRef):
        return record.attributes.get(left.key, _MISSING)
    if left.name == "status":
        return record.status.value
    value: object = getattr(record, left.name)
    return _MISSING if value is None else value


def _compare(found: object, op: str, value: object) -> bool:
    if found is _MISSING:
        return False
    if op == "=":
        return _typed_key(found) == _typed_key(value)
    if op == "!=":
        return _typed_key(found) != _typed_key(value)
    return _ordered(found, op, value)


def matches(record: RunRecord, expr: Expr) -> bool:
    """Whether run ``record`` passes filter ``expr`` (the reference semantics).

    Only the run's current attributes count (step-scoped ones are not searchable).
    """
    if isinstance(expr, And):
        return all(matches(record, item) for item in expr.items)
    if isinstance(expr, Or):
        return any(matches(record, item) for item in expr.items)
    if isinstance(expr, Not):
        return not matches(record, expr.item)
    found = _operand(record, expr.left)
    if isinstance(expr, Compare):
        return _compare(found, expr.op, expr.value)
    if isinstance(expr, In):
        return any(_compare(found, "=", value) for value in expr.values)
    if isinstance(expr, StartsWith):
        return isinstance(found, str) and found.startswith(expr.prefix)
    if isinstance(expr, IsNull):
        return (found is _MISSING or found is None) != expr.negated
    raise NotImplementedError(f"unknown filter node {type(expr).__name__}")
