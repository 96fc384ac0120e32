"""The run filter language: ``parse`` text into a ``worlds.query`` tree, ``format`` it back.

::

    from workflow import list_runs
    from workflow.query import parse, format

    expr = parse("status IN ('failed', 'cancelled') AND customer = 'c-9'")
    await list_runs(query=expr)          # or query="..." directly
    format(expr)                         # canonical text; parse(format(e)) == e

Grammar (keywords are case-insensitive; field names and keys are not)::

    query      := or_expr
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := not_expr ("AND" not_expr)*
    not_expr   := "NOT" not_expr | "(" or_expr ")" | predicate
    predicate  := operand op literal
                | operand ["NOT"] "IN" "(" literal ("," literal)* ")"
                | operand "STARTS_WITH" string
                | operand "IS" ["NOT"] "NULL"
    op         := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    operand    := field | key | "attributes." key | "`" any text "`"
    field      := "status" | "workflow" | "created_at" | "closed_at" | "id"
    literal    := string | number | "true" | "false" | "null" | "TIMESTAMP" string
    string     := '...' | "..."   (backslash escapes \\\\ \\' \\" \\n \\t; no others)

A bare name that is not a field is an attribute key (letters of any script,
digits and ``_ $ . : -``, not starting with a digit: ``клиент = 'x'``); a key
with other characters, or one spelled like a field or keyword, is written in
backquotes (a backquote inside is doubled). Time fields compare with quoted
ISO 8601 datetimes (``'2024-05-01'``, ``'2024-05-01T12:00:00Z'``; no offset
means UTC). An attribute holding a
datetime compares with ``TIMESTAMP '...'``. ``x NOT IN (...)`` means
``NOT x IN (...)``. The semantics are those of ``worlds.query``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from workflow.errors import QuerySyntaxError
from worlds.query import (
    FIELDS,
    MAX_DEPTH,
    MAX_TERMS,
    TIME_FIELDS,
    And,
    AttrRef,
    Compare,
    CompareOp,
    Expr,
    FieldName,
    FieldRef,
    In,
    IsNull,
    Not,
    Operand,
    Or,
    StartsWith,
    check,
)
from worlds.types import RunStatus

__all__ = [
    "And",
    "AttrRef",
    "Compare",
    "Expr",
    "FieldRef",
    "In",
    "IsNull",
    "Not",
    "Or",
    "QuerySyntaxError",
    "StartsWith",
    "format",
    "parse",
]

_KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "STARTS_WITH", "TIMESTAMP"}
)
_BARE = re.compile(r"(?:[^\W\d]|\$)[\w$.:\-]*")
"""A bare key: a letter (any script), ``_`` or ``$``, then letters, digits, ``_ $ . : -``."""
_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_OPS = ("<=", ">=", "!=", "<>", "=", "<", ">")
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}
_MAX_NESTING = (MAX_DEPTH - 4) // 3
"""Parentheses and NOTs one query may nest; keeps the tree within ``MAX_DEPTH``."""
_ATTRIBUTES = "attributes."


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "name", "quoted", "string", "number", "op", "punct", "keyword", "end"
    text: str
    value: object
    start: int


def _is_keyword(word: str) -> bool:
    # ASCII only: the upper() of a Turkish dotless-i key can spell "IN"
    return word.isascii() and word.upper() in _KEYWORDS


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            tokens.append(_Token("end", "", None, pos))
            return tokens
        char = text[pos]
        if char in "'\"":
            value, end = _read_string(text, pos)
            tokens.append(_Token("string", text[pos:end], value, pos))
        elif char == "`":
            value, end = _read_quoted_name(text, pos)
            tokens.append(_Token("quoted", text[pos:end], value, pos))
        elif char in "(),":
            end = pos + 1
            tokens.append(_Token("punct", char, char, pos))
        elif number := _NUMBER.match(text, pos):
            end = number.end()
            if end < len(text) and (text[end].isalnum() or text[end] in "_$."):
                raise QuerySyntaxError("malformed number", text, pos)
            literal = number.group()
            is_int = number.group(1) is None and number.group(2) is None
            tokens.append(
                _Token("number", literal, int(literal) if is_int else float(literal), pos)
            )
        elif name := _BARE.match(text, pos):
            end = name.end()
            word = name.group()
            kind = "keyword" if _is_keyword(word) else "name"
            tokens.append(_Token(kind, word, word.upper() if kind == "keyword" else word, pos))
        else:
            op = next((op for op in _OPS if text.startswith(op, pos)), None)
            if op is None:
                raise QuerySyntaxError(f"unexpected character {char!r}", text, pos)
            end = pos + len(op)
            tokens.append(_Token("op", op, "!=" if op == "<>" else op, pos))
        pos = end


def _read_string(text: str, start: int) -> tuple[str, int]:
    quote, pos = text[start], start + 1
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == quote:
            return "".join(out), pos + 1
        if char == "\\":
            if pos + 1 == len(text):
                break
            nxt = text[pos + 1]
            if nxt not in _ESCAPES:
                raise QuerySyntaxError(
                    f"unknown escape \\{nxt} in a string; the escapes are \\\\ \\' \\\" \\n \\t",
                    text,
                    pos,
                )
            out.append(_ESCAPES[nxt])
            pos += 2
            continue
        out.append(char)
        pos += 1
    raise QuerySyntaxError("unterminated string", text, start)


def _read_quoted_name(text: str, start: int) -> tuple[str, int]:
    pos = start + 1
    out: list[str] = []
    while pos < len(text):
        if text[pos] == "`":
            if text.startswith("``", pos):
                out.append("`")
                pos += 2
                continue
            if not out:
                raise QuerySyntaxError("empty attribute key", text, start)
            return "".join(out), pos + 1
        out.append(text[pos])
        pos += 1
    raise QuerySyntaxError("unterminated backquoted name", text, start)


def _parse_time(text: str, token: _Token) -> datetime:
    try:
        moment = datetime.fromisoformat(str(token.value))
    except ValueError:
        raise QuerySyntaxError(
            f"{token.text} is not an ISO 8601 datetime (like '2024-05-01T12:00:00Z')",
            text,
            token.start,
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0
        self.nesting = 0
        self.terms = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def fail(self, message: str, token: _Token | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(message, self.text, (token or self.token).start)

    def describe(self, token: _Token) -> str:
        return "the end of the query" if token.kind == "end" else repr(token.text)

    def expected(self, what: str) -> QuerySyntaxError:
        return self.fail(f"expected {what}, found {self.describe(self.token)}")

    def take(self) -> _Token:
        token = self.token
        self.index += 1
        return token

    def accept(self, kind: str, value: object) -> _Token | None:
        if self.token.kind == kind and self.token.value == value:
            return self.take()
        return None

    def query(self) -> Expr:
        if self.token.kind == "end":
            raise self.fail("empty query: expected a condition like status = 'failed'")
        expr = self.or_expr()
        if self.token.kind != "end":
            raise self.expected("AND, OR or the end of the query")
        return expr

    def or_expr(self) -> Expr:
        items = [self.and_expr()]
        while self.accept("keyword", "OR"):
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Expr:
        items = [self.not_expr()]
        while self.accept("keyword", "AND"):
            items.append(self.not_expr())
        return items[0] if len(items) == 1 else And(tuple(items))

    def nest(self, token: _Token) -> None:
        self.nesting += 1
        if self.nesting > _MAX_NESTING:
            raise self.fail(f"the query nests deeper than {_MAX_NESTING} levels", token)

    def not_expr(self) -> Expr:
        start = self.token
        if self.accept("keyword", "NOT"):
            self.nest(start)
            item = self.not_expr()
            self.nesting -= 1
            return Not(item)
        if self.accept("punct", "("):
            self.nest(start)
            expr = self.or_expr()
            if not self.accept("punct", ")"):
                raise self.expected("')' or AND/OR")
            self.nesting -= 1
            return expr
        return self.predicate()

    def operand(self) -> Operand:
        token = self.token
        if token.kind == "quoted":
            self.take()
            return AttrRef(str(token.value))
        if token.kind != "name":
            raise self.expected("a field (status, workflow, created_at, closed_at, id) or key")
        self.take()
        name = str(token.value)
        if name in FIELDS:
            return FieldRef(cast(FieldName, name))
        if name == _ATTRIBUTES:
            quoted = self.token
            if quoted.kind != "quoted" or quoted.start != token.start + len(_ATTRIBUTES):
                raise self.expected("a key right after 'attributes.'")
            self.take()
            return AttrRef(str(quoted.value))
        if name.startswith(_ATTRIBUTES):
            return AttrRef(name[len(_ATTRIBUTES) :])
        if len(name) > 256:
            raise self.fail("attribute keys are at most 256 characters", token)
        return AttrRef(name)

    def predicate(self) -> Expr:
        first = self.token
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise self.fail(f"the query has more than {MAX_TERMS} conditions", first)
        left = self.operand()
        token = self.token
        if token.kind == "op":
            self.take()
            op = cast(CompareOp, token.value)
            literal = self.token
            value = self.literal(left, ordering=op not in ("=", "!="))
            if op not in ("=", "!=") and (value is None or isinstance(value, bool)):
                raise self.fail(f"{op} orders numbers, strings and datetimes only", literal)
            return Compare(left, op, value)
        if self.accept("keyword", "STARTS_WITH"):
            literal = self.token
            if literal.kind != "string":
                raise self.expected("a quoted string after STARTS_WITH")
            if isinstance(left, FieldRef) and left.name in TIME_FIELDS:
                raise self.fail(f"STARTS_WITH does not apply to {left.name}", token)
            self.take()
            return StartsWith(left, str(literal.value))
        if self.accept("keyword", "IS"):
            negated = self.accept("keyword", "NOT") is not None
            if not self.accept("keyword", "NULL"):
                raise self.expected("NULL")
            if isinstance(left, FieldRef) and left.name != "closed_at":
                raise self.fail(f"{left.name} is never null (IS NULL applies to closed_at)", token)
            return IsNull(left, negated)
        negated = self.accept("keyword", "NOT") is not None
        if self.accept("keyword", "IN"):
            if not self.accept("punct", "("):
                raise self.expected("'(' after IN")
            values = [self.literal(left, ordering=False)]
            while self.accept("punct", ","):
                values.append(self.literal(left, ordering=False))
            if not self.accept("punct", ")"):
                raise self.expected("',' or ')'")
            result: Expr = In(left, tuple(values))
            return Not(result) if negated else result
        if negated:
            raise self.expected("IN after NOT")
        raise self.expected("an operator (=, !=, <, <=, >, >=, IN, STARTS_WITH, IS)")

    def literal(self, left: Operand, *, ordering: bool) -> object:
        if self.token.kind == "end":
            raise self.expected("a value")
        token = self.take()
        if token.kind == "keyword" and token.value == "TIMESTAMP":
            quoted = self.take()
            if quoted.kind != "string":
                raise self.fail("expected a quoted datetime after TIMESTAMP", quoted)
            if isinstance(left, FieldRef) and left.name not in TIME_FIELDS:
                raise self.fail(f"{left.name} compares with strings, not datetimes", token)
            return _parse_time(self.text, quoted)
        if isinstance(left, FieldRef):
            if token.kind != "string":
                hint = "a quoted ISO datetime" if left.name in TIME_FIELDS else "a quoted string"
                raise self.fail(f"{left.name} compares with {hint}", token)
            if left.name in TIME_FIELDS:
                return _parse_time(self.text, token)
            if left.name == "status" and not ordering:
                known = [status.value for status in RunStatus]
                if token.value not in known:
                    raise self.fail(f"unknown status {token.text}; one of {known}", token)
            return token.value
        if token.kind in ("string", "number"):
            if isinstance(token.value, int) and not -(2**63) <= token.value < 2**63:
                raise self.fail("integer out of the 64-bit range", token)
            if isinstance(token.value, float) and token.value in (float("inf"), -float("inf")):
                raise self.fail("number out of range", token)
            return token.value
        if token.kind == "keyword" and token.value in ("TRUE", "FALSE", "NULL"):
            return {"TRUE": True, "FALSE": False, "NULL": None}[str(token.value)]
        self.index -= 1
        raise self.expected("a value (a quoted string, number, true, false or null)")


def parse(text: str) -> Expr:
    """Parse a filter; see the module docstring for the grammar.

    Raises:
        QuerySyntaxError: the text is malformed or ill-typed; ``.position``
            points at the offending character and ``str(error)`` shows it.
    """
    if not isinstance(text, str):
        raise TypeError(f"a query is a str, not {type(text).__name__}")
    expr = _Parser(text).query()
    try:
        check(expr)
    except ValueError as exc:  # a safety net: the parser checks as it goes
        raise QuerySyntaxError(str(exc), text, 0) from None
    return expr


# --------------------------------------------------------------------------- printing


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return "'" + escaped.replace("\n", "\\n").replace("\t", "\\t") + "'"


def _time(value: datetime) -> str:
    return _quote(value.astimezone(UTC).isoformat().replace("+00:00", "Z"))


def _operand_text(left: Operand) -> str:
    if isinstance(left, FieldRef):
        return left.name
    key = left.key
    plain = (
        _BARE.fullmatch(key) is not None
        and not _is_keyword(key)
        and key not in FIELDS
        and not (key == "attributes" or key.startswith(_ATTRIBUTES))
    )
    return key if plain else "`" + key.replace("`", "``") + "`"


def _literal_text(left: Operand, value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, datetime):
        in_time_field = isinstance(left, FieldRef) and left.name in TIME_FIELDS
        return _time(value) if in_time_field else "TIMESTAMP " + _time(value)
    if isinstance(value, str):
        return _quote(value)
    raise ValueError(f"not a filter value: {value!r}")


def format(expr: Expr) -> str:  # noqa: A001 - the natural name, as in str.format
    """The canonical text of ``expr``: ``parse(format(expr)) == expr``."""

    def wrap(item: Expr, parenthesise: tuple[type, ...]) -> str:
        text = format(item)
        return f"({text})" if isinstance(item, parenthesise) else text

    if isinstance(expr, And):
        return " AND ".join(wrap(item, (And, Or)) for item in expr.items)
    if isinstance(expr, Or):
        return " OR ".join(wrap(item, (Or,)) for item in expr.items)
    if isinstance(expr, Not):
        return "NOT " + wrap(expr.item, (And, Or))
    left = _operand_text(expr.left)
    if isinstance(expr, Compare):
        return f"{left} {expr.op} {_literal_text(expr.left, expr.value)}"
    if isinstance(expr, In):
        values = ", ".join(_literal_text(expr.left, value) for value in expr.values)
        return f"{left} IN ({values})"
    if isinstance(expr, StartsWith):
        return f"{left} STARTS_WITH {_quote(expr.prefix)}"
    if isinstance(expr, IsNull):
        return f"{left} IS NOT NULL" if expr.negated else f"{left} IS NULL"
    raise ValueError(f"not a filter expression: {expr!r}")
