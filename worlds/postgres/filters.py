"""The run-filter compiler of the PostgreSQL world: ``RunQuery`` to one SQL statement."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal

from worlds.postgres.statements import RUN_COLUMNS
from worlds.query import (
    And,
    Compare,
    CountField,
    Expr,
    FieldRef,
    In,
    IsNull,
    Not,
    Or,
    RunQuery,
    StartsWith,
    check,
)
from worlds.semantics import index_terms, index_value


def list_runs_sql(query: RunQuery, before_id: str | None) -> tuple[str, list[object]]:
    """The statement and parameters listing runs that match ``query``, newest first.

    With attribute filters (``query.attributes`` and the top-level
    ``attribute = value`` terms of ``query.where``), the first one is joined
    through the ``attributes_value`` index in descending run id order (the
    cursor is a range bound on it) and the others are ``EXISTS`` probes, which
    the server turns into joins and orders by its own per-value statistics
    (the values are parameters of a custom plan), so the query's order does
    not decide which filter is scanned (``terms.SELECTIVITY_CAP`` explains the
    rule; ``benchmarks/search.py`` measures it: scanning the most selective
    filter explicitly cost more here than the planner's choice). The rest of
    ``query.where`` compiles to a parameterised condition (``where_sql``).
    ``LIMIT`` is ``query.limit + 1`` so the caller can tell whether there is more.

    Raises:
        ValueError: ``query.where`` is not a well-formed filter.
    """
    where: list[str] = []
    params: list[object] = []

    def param(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    attributes, rest = dict(query.attributes), query.where
    if rest is not None:
        attributes, rest = index_terms(
            attributes, rest, indexable=lambda key, value: not _unstorable(key, index_value(value))
        )
    source, order = "runs r", "r.id"
    others = list(attributes.items())
    if others:
        (key, value), *others = others
        source, order = "attributes a JOIN runs r ON r.id = a.run_id", "a.run_id"
        where.append(f"a.key = {param(key)} AND a.ivalue = {param(index_value(value))}")
    if before_id is not None:
        where.append(f"{order} < {param(before_id)}")
    if query.workflow is not None:
        where.append(f"r.workflow = {param(query.workflow)}")
    if query.statuses is not None:
        where.append(f"r.status = ANY({param(sorted(s.value for s in query.statuses))}::text[])")
    if query.created_after is not None:
        where.append(f"r.created_at >= {param(query.created_after)}")
    if query.created_before is not None:
        where.append(f"r.created_at < {param(query.created_before)}")
    for key, value in others:
        where.append(
            "EXISTS (SELECT 1 FROM attributes b WHERE b.run_id = r.id "
            f"AND b.key = {param(key)} AND b.ivalue = {param(index_value(value))})"
        )
    if rest is not None:
        where.append(where_sql(rest, params))
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    limit = param(query.limit + 1)
    return f"SELECT {RUN_COLUMNS} FROM {source}{clause} ORDER BY {order} DESC LIMIT {limit}", params


def count_runs_sql(
    query: RunQuery, field: CountField, since: datetime, until: datetime, width: int
) -> tuple[str, list[object]]:
    """The statement counting runs matching ``query`` per bucket and status
    (``World.count_runs``).

    The window is a range of the ``runs_created`` or ``runs_closed_status``
    index (covering: no row is read for its status). The bucket is whole
    seconds from ``since`` (``floor`` of the epoch difference, exact to the
    microsecond in ``numeric``). Other filters are tests on the rows found;
    attribute ones are ``EXISTS`` probes the planner may turn into joins.

    Raises:
        ValueError: ``query.where`` is not a well-formed filter.
    """
    params: list[object] = []

    def param(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    column = "r.created_at" if field == "created" else "r.closed_at"
    start = param(since)
    bucket = f"floor(extract(epoch FROM {column} - {start}::timestamptz) / {param(width)})::bigint"
    where = [f"{column} >= {start}", f"{column} < {param(until)}"]
    attributes, rest = dict(query.attributes), query.where
    if rest is not None:
        attributes, rest = index_terms(
            attributes, rest, indexable=lambda key, value: not _unstorable(key, index_value(value))
        )
    if query.workflow is not None:
        where.append(f"r.workflow = {param(query.workflow)}")
    if query.statuses is not None:
        where.append(f"r.status = ANY({param(sorted(s.value for s in query.statuses))}::text[])")
    if query.created_after is not None:
        where.append(f"r.created_at >= {param(query.created_after)}")
    if query.created_before is not None:
        where.append(f"r.created_at < {param(query.created_before)}")
    for key, value in attributes.items():
        where.append(
            "EXISTS (SELECT 1 FROM attributes b WHERE b.run_id = r.id "
            f"AND b.key = {param(key)} AND b.ivalue = {param(index_value(value))})"
        )
    if rest is not None:
        where.append(where_sql(rest, params))
    return (
        f"SELECT {bucket} AS bucket, r.status AS status, count(*) AS n FROM runs r "
        f"WHERE {' AND '.join(where)} GROUP BY 1, 2 ORDER BY 1, 2"
    ), params


# PostgreSQL text cannot hold NUL, so no stored key or value contains one: a
# filter naming such a key finds it absent, such a value equals nothing, and an
# ordering against one is rewritten against its part before the first NUL (a
# stored string is < "ab\0c" exactly when it is <= "ab"). These never bind.
_NUL = "\0"
_FIELD_COLUMNS = {
    "status": "r.status",
    "workflow": "r.workflow",
    "id": "r.id",
    "created_at": "r.created_at",
    "closed_at": "r.closed_at",
}
"""The only column names a filter can reach; values are always bound parameters."""
_SQL_OPERATORS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_BELOW_NUL = {"<": "<=", "<=": "<=", ">": ">", ">=": ">"}
_ATTRIBUTE_ROW = "SELECT 1 FROM attributes x WHERE x.run_id = r.id AND x.key = "
# Ints compare exactly as numeric; floats ("f:1.5", "f:inf") as float8, NaN never.
# CASE, not AND: PostgreSQL does not promise to test the type before the cast.
_NUMBER_TEST = (
    "CASE WHEN left(x.ivalue, 2) = 'i:' THEN substr(x.ivalue, 3)::numeric {} {}::numeric "
    "WHEN left(x.ivalue, 2) = 'f:' AND x.ivalue <> 'f:nan' "
    "THEN substr(x.ivalue, 3)::float8 {} {}::float8 ELSE false END"
)


def _unstorable(*texts: str) -> bool:
    return any(_NUL in text for text in texts)


def where_sql(expr: Expr, params: list[object]) -> str:
    """A condition over ``runs r`` equivalent to ``worlds.query.matches``.

    Appends the values it binds to ``params`` (``$n`` counts from its length).
    Column names come from a fixed whitelist and operators from a fixed
    table; every value and attribute key is a bound parameter. The condition
    is never NULL, so ``NOT`` is two-valued like the Python evaluator. Strings
    order by code point (``COLLATE "C"``), attribute datetimes by their UTC
    index text, ints against floats exactly.

    Raises:
        ValueError: ``expr`` is not a well-formed filter.
        NotImplementedError: a node this world does not know.
    """
    check(expr)

    def bind(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    def visit(node: Expr) -> str:
        if isinstance(node, (And, Or)):
            joiner = " AND " if isinstance(node, And) else " OR "
            return "(" + joiner.join(visit(item) for item in node.items) + ")"
        if isinstance(node, Not):
            return f"NOT ({visit(node.item)})"
        if isinstance(node, (Compare, In, StartsWith, IsNull)):
            if isinstance(node.left, FieldRef):
                return _field_sql(node, node.left.name, bind)
            return _attribute_sql(node, node.left.key, bind)
        raise NotImplementedError(
            f"the PostgreSQL world cannot serve {type(node).__name__} filters"
        )

    return visit(expr)


def _equal_sql(column: str, op: str, texts: Sequence[str], bind: Callable[[object], str]) -> str:
    """``column`` (never NULL) equal to one of ``texts``, or (``!=``) unequal to the one."""
    storable = [text for text in texts if not _unstorable(text)]
    if op == "!=":
        return f"{column} <> {bind(storable[0])}" if storable else "true"
    if len(storable) == 1:
        return f"{column} = {bind(storable[0])}"
    return f"{column} = ANY({bind(storable)}::text[])" if storable else "false"


def _order_sql(column: str, op: str, text: str, bind: Callable[[object], str]) -> str:
    """``column`` ordered against ``text`` by code point."""
    if _NUL in text:
        text, op = text[: text.index(_NUL)], _BELOW_NUL[op]
    return f'{column} COLLATE "C" {_SQL_OPERATORS[op]} {bind(text)}'


def _starts_sql(column: str, prefix: str, bind: Callable[[object], str]) -> str:
    return "false" if _unstorable(prefix) else f"starts_with({column}, {bind(prefix)})"


def _field_sql(
    node: Compare | In | StartsWith | IsNull, name: str, bind: Callable[[object], str]
) -> str:
    column = _FIELD_COLUMNS[name]
    if isinstance(node, IsNull):
        return f"{column} IS NOT NULL" if node.negated else f"{column} IS NULL"
    if name in ("created_at", "closed_at"):
        if isinstance(node, Compare):
            condition = f"{column} {_SQL_OPERATORS[node.op]} {bind(node.value)}"
        elif isinstance(node, In):
            condition = f"{column} = ANY({bind(list(node.values))}::timestamptz[])"
        else:
            raise ValueError(f"STARTS_WITH does not apply to {name}")
        return f"({column} IS NOT NULL AND {condition})" if name == "closed_at" else condition
    if isinstance(node, StartsWith):
        return _starts_sql(column, node.prefix, bind)
    if isinstance(node, In):
        return _equal_sql(column, "=", [str(value) for value in node.values], bind)
    if node.op in ("=", "!="):
        return _equal_sql(column, node.op, [str(node.value)], bind)
    return _order_sql(column, node.op, str(node.value), bind)


def _attribute_sql(
    node: Compare | In | StartsWith | IsNull, key: str, bind: Callable[[object], str]
) -> str:
    if _unstorable(key):
        return "true" if isinstance(node, IsNull) and not node.negated else "false"
    row = _ATTRIBUTE_ROW + bind(key)
    if isinstance(node, IsNull):
        present = f"EXISTS ({row} AND x.ivalue <> 'n:')"
        return present if node.negated else f"NOT {present}"
    if isinstance(node, StartsWith):
        condition = _starts_sql("x.ivalue", "s:" + node.prefix, bind)
    elif isinstance(node, In):
        condition = _equal_sql("x.ivalue", "=", [index_value(v) for v in node.values], bind)
    elif node.op in ("=", "!="):
        condition = _equal_sql("x.ivalue", node.op, [index_value(node.value)], bind)
    elif isinstance(node.value, (int, float)):
        condition = _number_sql(node.op, node.value, bind)
    else:
        kind = "'s:'" if isinstance(node.value, str) else "'t:'"
        ordered = _order_sql("x.ivalue", node.op, index_value(node.value), bind)
        condition = f"left(x.ivalue, 2) = {kind} AND {ordered}"
    return f"EXISTS ({row} AND {condition})"


def _number_sql(op: str, value: float, bind: Callable[[object], str]) -> str:
    """Int and float attributes ordered against ``value`` exactly, as Python orders them."""
    exact = bind(Decimal(value))
    bound, float_op = float(value), op
    if bound != value:
        # ``value`` is an int between two floats: a float is below it exactly
        # when it is below the upper of the two.
        upper = bound if bound > value else math.nextafter(bound, math.inf)
        bound, float_op = upper, "<" if op in ("<", "<=") else ">="
    operator = _SQL_OPERATORS[op]
    return _NUMBER_TEST.format(operator, exact, _SQL_OPERATORS[float_op], bind(bound))
