"""The run filter language: parser, printer, evaluator, and the worlds that serve it."""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worlds
from tests.conftest import drop_schema, fresh_schema, full_size, with_schema
from workflow import list_runs
from workflow.query import (
    And,
    AttrRef,
    Compare,
    Expr,
    FieldRef,
    In,
    IsNull,
    Not,
    Or,
    QuerySyntaxError,
    StartsWith,
    format,  # noqa: A004 - the module's printer
    parse,
)
from worlds.postgres import filters as pg_filters
from worlds.query import RunQuery, matches
from worlds.semantics import new_run_id
from worlds.sqlite.filters import list_runs_sql, where_sql
from worlds.types import (
    CommitRequest,
    CreateRunRequest,
    ErrorInfo,
    RunCompleted,
    RunFailed,
    RunRecord,
    RunStarted,
    RunStatus,
)

NOON = datetime(2024, 1, 1, 12, tzinfo=UTC)


def same(a: Expr, b: Expr) -> bool:
    """Tree equality that tells 1, 1.0 and True apart."""
    return msgspec.msgpack.encode(a) == msgspec.msgpack.encode(b)


# --------------------------------------------------------------------------- parsing

PARSED: list[tuple[str, Expr]] = [
    ("status = 'failed'", Compare(FieldRef("status"), "=", "failed")),
    ('customer != "c-9"', Compare(AttrRef("customer"), "!=", "c-9")),
    ("tier >= 2", Compare(AttrRef("tier"), ">=", 2)),
    ("score < -1.5e3", Compare(AttrRef("score"), "<", -1500.0)),
    (
        "vip = TRUE and note = null",
        And((Compare(AttrRef("vip"), "=", True), Compare(AttrRef("note"), "=", None))),
    ),
    (
        "a = 1 OR b = 2 AND c = 3",
        Or(
            (
                Compare(AttrRef("a"), "=", 1),
                And((Compare(AttrRef("b"), "=", 2), Compare(AttrRef("c"), "=", 3))),
            )
        ),
    ),
    (
        "(a = 1 OR b = 2) AND c = 3",
        And(
            (
                Or((Compare(AttrRef("a"), "=", 1), Compare(AttrRef("b"), "=", 2))),
                Compare(AttrRef("c"), "=", 3),
            )
        ),
    ),
    ("NOT a = 1", Not(Compare(AttrRef("a"), "=", 1))),
    ("x NOT IN (1, 'y')", Not(In(AttrRef("x"), (1, "y")))),
    ("workflow STARTS_WITH 'bill'", StartsWith(FieldRef("workflow"), "bill")),
    ("closed_at IS NOT NULL", IsNull(FieldRef("closed_at"), negated=True)),
    ("attributes.status = 'x'", Compare(AttrRef("status"), "=", "x")),
    ("`odd key` <> 'it\\'s'", Compare(AttrRef("odd key"), "!=", "it's")),
    ("attributes.`a``b` IS NULL", IsNull(AttrRef("a`b"))),
    ("$name = 'order-7'", Compare(AttrRef("$name"), "=", "order-7")),
    ("created_at > '2024-01-01T12:00:00Z'", Compare(FieldRef("created_at"), ">", NOON)),
    ("created_at > '2024-01-01 14:00:00+02:00'", Compare(FieldRef("created_at"), ">", NOON)),
    ("due < TIMESTAMP '2024-01-01T12:00'", Compare(AttrRef("due"), "<", NOON)),
    ("status in ('pending','running')", In(FieldRef("status"), ("pending", "running"))),
]


@pytest.mark.parametrize(("text", "tree"), PARSED)
def test_parse_builds_the_tree(text: str, tree: Expr) -> None:
    parsed = parse(text)
    assert same(parsed, tree), parsed
    assert same(parse(format(parsed)), tree)


def test_format_is_canonical() -> None:
    assert (
        format(parse("a=1 and (b='x' or not c is null)")) == "a = 1 AND (b = 'x' OR NOT c IS NULL)"
    )
    assert format(parse("`status` = 1")) == "`status` = 1"
    assert format(parse("created_at>='2024-01-01'")) == "created_at >= '2024-01-01T00:00:00Z'"


MALFORMED: list[tuple[str, int, str]] = [
    ("", 0, "empty query"),
    ("   ", 3, "empty query"),
    ("status =", 8, "expected a value"),
    ("status = 'bogus'", 9, "unknown status"),
    ("a = 'x", 4, "unterminated string"),
    ("a == 1", 3, "expected a value"),
    ("created_at > 5", 13, "ISO datetime"),
    ("created_at > 'soon'", 13, "ISO 8601"),
    ("a = 1 AND", 9, "expected a field"),
    ("(a = 1", 6, "')'"),
    ("a = 1)", 5, "expected AND, OR"),
    ("a < null", 4, "orders numbers"),
    ("x IN ()", 6, "expected a value"),
    ("`` = 1", 0, "empty attribute key"),
    ("`a = 1", 0, "unterminated"),
    ("status IS NULL", 7, "never null"),
    ("workflow = 3", 11, "quoted string"),
    ("a = 99999999999999999999", 4, "64-bit"),
    ("a = 1 # b", 6, "unexpected character"),
    ("a ~ 1", 2, "unexpected character"),
    ("a STARTS_WITH 1", 14, "quoted string"),
    ("a NOT = 1", 6, "IN after NOT"),
    ("12x = 1", 0, "malformed number"),
    ("(" * 30 + "a = 1" + ")" * 30, 20, "nests deeper"),
    ("c = 'c\\q'", 6, "unknown escape \\q"),
    ('c = "\\x41"', 5, "unknown escape \\x"),
    ("1клиент = 'x'", 0, "malformed number"),  # noqa: RUF001 - Cyrillic on purpose
]


@pytest.mark.parametrize(("text", "position", "message"), MALFORMED)
def test_malformed_queries_point_at_the_problem(text: str, position: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse(text)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.position == position, str(error)
    assert message in str(error)
    lines = str(error).splitlines()
    assert lines[-1].index("^") - 2 == position - text.rfind("\n", 0, position) - 1


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("клиент = 'x'", Compare(AttrRef("клиент"), "=", "x")),
        ("顧客.id >= 2", Compare(AttrRef("顧客.id"), ">=", 2)),
        ("ın = 1", Compare(AttrRef("ın"), "=", 1)),  # noqa: RUF001 - its upper() is "IN"
        (r"""c = 'a\\b\'c\"d'""", Compare(AttrRef("c"), "=", "a\\b'c\"d")),
    ],
)
def test_letters_of_any_script_and_the_known_escapes(text: str, tree: Expr) -> None:
    assert same(parse(text), tree)
    assert same(parse(format(tree)), tree)


def test_a_long_malformed_query_shows_a_window_around_the_error() -> None:
    text = "a = '" + "x" * 10_000 + "' AND AND b = 1" + " AND c = 1" * 100
    with pytest.raises(QuerySyntaxError) as caught:
        parse(text)
    error = caught.value
    assert error.position == text.index("AND AND") + 4
    _, shown, caret = str(error).splitlines()
    assert len(shown) < 100 and len(caret) < 100
    assert shown.startswith("  …") and shown.endswith("…")
    assert shown[caret.index("^") :].startswith("AND b = 1")


@pytest.mark.anyio
async def test_a_non_ascii_key_finds_its_runs_on_every_world(world: Any) -> None:
    for customer in ("x", "y"):
        await world.create_run(
            CreateRunRequest(
                run_id=new_run_id(),
                workflow="w",
                args=b"",
                attributes={"клиент": customer},
            )
        )
    page = await list_runs(query="клиент = 'x'", world=world)
    assert [run.record.attributes["клиент"] for run in page if run.record] == ["x"]


@given(st.text(alphabet=st.sampled_from(list("ab=<>!()'\"` ,.-_1e:ANDORTINUL$\\")), max_size=40))
def test_any_text_parses_or_raises_a_syntax_error(text: str) -> None:
    try:
        expr = parse(text)
    except QuerySyntaxError as error:
        assert 0 <= error.position <= len(text)
        assert "^" in str(error)
    else:
        assert same(parse(format(expr)), expr)


@given(st.text(max_size=60))
def test_arbitrary_unicode_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(QuerySyntaxError):
        parse(text)


# --------------------------------------------------------------------------- generated trees

KEYS = st.one_of(
    st.sampled_from(["customer", "tier", "$name", "a.b", "status", "in", "odd key", "x`y", "é"]),
    st.text(min_size=1, max_size=8),
)
STRINGS = st.text(max_size=8)
NUMBERS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)
TIMES = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
ATTR_VALUES = st.one_of(STRINGS, NUMBERS, st.booleans(), st.none(), TIMES)
STATUSES = st.sampled_from(["pending", "running", "completed", "failed", "cancelled"])


@st.composite
def predicates(draw: st.DrawFn) -> Expr:
    kind = draw(st.sampled_from(["attr", "status", "workflow", "id", "created_at", "closed_at"]))
    shape = draw(st.sampled_from(["eq", "order", "in", "starts", "null"]))
    if kind == "attr":
        left: AttrRef | FieldRef = AttrRef(draw(KEYS))
        values = ATTR_VALUES
        orderable = st.one_of(STRINGS, NUMBERS, TIMES)
    elif kind in ("created_at", "closed_at"):
        left = FieldRef(kind)  # type: ignore[arg-type]
        values = orderable = TIMES
        if shape == "starts":
            shape = "eq"
        if shape == "null" and kind == "created_at":
            shape = "order"
    else:
        left = FieldRef(kind)  # type: ignore[arg-type]
        values = STATUSES if kind == "status" else STRINGS
        orderable = STRINGS
        if shape == "null":
            shape = "starts"
    if shape == "eq":
        return Compare(left, draw(st.sampled_from(["=", "!="])), draw(values))
    if shape == "order":
        return Compare(left, draw(st.sampled_from(["<", "<=", ">", ">="])), draw(orderable))
    if shape == "in":
        return In(left, tuple(draw(st.lists(values, min_size=1, max_size=3))))
    if shape == "starts":
        return StartsWith(left, draw(STRINGS))
    return IsNull(left, draw(st.booleans()))


EXPRESSIONS: st.SearchStrategy[Expr] = st.recursive(
    predicates(),
    lambda inner: st.one_of(
        st.builds(lambda items: And(tuple(items)), st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda items: Or(tuple(items)), st.lists(inner, min_size=2, max_size=3)),
        st.builds(Not, inner),
    ),
    max_leaves=8,
)


@pytest.mark.slow
@given(EXPRESSIONS)
@settings(max_examples=full_size(100, 300))
def test_generated_trees_round_trip(expr: Expr) -> None:
    text = format(expr)
    parsed = parse(text)
    assert same(parsed, expr), text
    assert format(parsed) == text


MARK = "\u2603"


@pytest.mark.slow
@given(EXPRESSIONS)
@settings(max_examples=full_size(80, 200))
def test_compiled_sql_binds_every_value(expr: Expr) -> None:
    """Marked values and keys reach SQLite only as parameters, never in the SQL text."""
    marked = _marked(expr)
    sql, params = where_sql(marked)
    assert MARK not in sql
    assert sql.count("?") == len(params)
    texts = [p for p in params if isinstance(p, str)]
    for key in _keys(marked):
        assert key in texts
    full, full_params = list_runs_sql(RunQuery(where=marked, limit=10), None)
    assert MARK not in full and full.count("?") == len(full_params)


@pytest.mark.slow
@given(EXPRESSIONS)
@settings(max_examples=full_size(80, 200))
def test_compiled_postgres_sql_binds_every_value(expr: Expr) -> None:
    """Marked values and keys reach PostgreSQL only as ``$n`` parameters."""
    marked = _marked(expr)
    params: list[object] = ["first"]
    sql = pg_filters.where_sql(marked, params)
    assert MARK not in sql
    _assert_numbered(sql, params, first=2)
    texts = [p for p in params if isinstance(p, str)]
    for key in _keys(marked):
        assert key in texts or "\0" in key
    for before in (None, MARK + "cursor"):
        query = RunQuery(where=marked, workflow=MARK, attributes={MARK: MARK}, limit=10)
        full, full_params = pg_filters.list_runs_sql(query, before)
        assert MARK not in full
        _assert_numbered(full, full_params)


def _assert_numbered(sql: str, params: list[object], first: int = 1) -> None:
    """``sql`` uses each of the parameters from ``$first`` on, and no other."""
    used = {int(n) for n in re.findall(r"\$(\d+)", sql)}
    assert used == set(range(first, len(params) + 1))


def _marked(expr: Expr) -> Expr:
    """``expr`` with every string value, prefix and attribute key marked."""

    def tag(value: Any) -> Any:
        return MARK + value if isinstance(value, str) else value

    def mark(node: Expr) -> Expr:
        if isinstance(node, And | Or):
            return type(node)(tuple(mark(item) for item in node.items))
        if isinstance(node, Not):
            return Not(mark(node.item))
        if isinstance(node.left, FieldRef):
            if node.left.name not in ("workflow", "id"):
                return node
            left: AttrRef | FieldRef = node.left
        else:
            left = AttrRef(MARK + node.left.key[:200])
        if isinstance(node, Compare):
            return Compare(left, node.op, tag(node.value))
        if isinstance(node, In):
            return In(left, tuple(tag(value) for value in node.values))
        if isinstance(node, StartsWith):
            return StartsWith(left, tag(node.prefix))
        return IsNull(left, node.negated)

    return mark(expr)


def _keys(expr: Expr) -> Iterator[str]:
    if isinstance(expr, And | Or):
        for item in expr.items:
            yield from _keys(item)
    elif isinstance(expr, Not):
        yield from _keys(expr.item)
    elif isinstance(expr.left, AttrRef):
        yield expr.left.key


def test_sql_injection_attempts_stay_data() -> None:
    expr = parse("`k'); DROP TABLE runs; --` = 'x\\' OR 1=1 --' AND workflow STARTS_WITH '%'")
    sql, params = where_sql(expr)
    assert "DROP" not in sql and "1=1" not in sql and "%" not in sql
    assert "k'); DROP TABLE runs; --" in params and "s:x' OR 1=1 --" in params
    pg_params: list[object] = []
    pg_sql = pg_filters.where_sql(expr, pg_params)
    assert "DROP" not in pg_sql and "1=1" not in pg_sql and "%" not in pg_sql
    assert "k'); DROP TABLE runs; --" in pg_params and "s:x' OR 1=1 --" in pg_params


# --------------------------------------------------------------------------- worlds agree


def _record(**fields: Any) -> RunRecord:
    return RunRecord(id="r1", workflow="wf", status=RunStatus.PENDING, created_at=NOON, **fields)


def test_evaluator_semantics() -> None:
    run = _record(attributes={"n": 2, "f": 2.5, "s": "abc", "b": True, "z": None, "t": NOON})
    assert matches(run, parse("n = 2 AND NOT n = 2.0 AND n < 2.5 AND f > 2"))
    assert matches(run, parse("s STARTS_WITH 'ab' AND s > 'abb' AND NOT s < 1"))
    assert matches(run, parse("z IS NULL AND missing IS NULL AND n IS NOT NULL AND z = null"))
    assert not matches(run, parse("missing != 1")) and matches(run, parse("NOT missing = 1"))
    assert matches(run, parse("b = true AND NOT b = 1 AND t = TIMESTAMP '2024-01-01T12:00Z'"))
    assert matches(run, parse("closed_at IS NULL AND NOT closed_at < '2030-01-01'"))


@pytest.fixture(scope="module")
def populated(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Populated]:
    """A memory, an SQLite and (with a server) a PostgreSQL world holding the same 60 random runs.

    Without a PostgreSQL server the worlds agree without it (``$CI`` makes that fail).
    """
    rng = random.Random(7)
    path: Path = tmp_path_factory.mktemp("query") / "w.db"
    urls = ["memory://", f"sqlite:///{path}"]
    try:
        postgres: str | None = with_schema(request.getfixturevalue("postgres_url"), fresh_schema())
    except pytest.skip.Exception:
        postgres = None
    if postgres is not None:
        urls.append(postgres)
    pool: list[Any] = [0, 1, -3, 2.5, 1.0, True, False, None, "a", "ab", "b", "", NOON]
    pool += [NOON + timedelta(hours=5)]

    async def fill() -> list[RunRecord]:
        opened = [worlds.open(url) for url in urls]
        _FIRST_MEMORY.append(opened[0])
        records: list[RunRecord] = []
        for n in range(60):
            keys = rng.sample(["customer", "tier", "a.b", "odd key", "$name"], rng.randint(0, 4))
            attributes = {key: rng.choice(pool) for key in keys}
            if "$name" in attributes:
                attributes["$name"] = f"run-{n}"
            request = CreateRunRequest(
                run_id=new_run_id(),
                workflow=rng.choice(["billing", "shipping", "bill"]),
                args=b"",
                attributes=attributes,
            )
            fate = rng.choice(["pending", "running", "completed", "failed", "cancelled"])
            events: tuple[Any, ...] = {
                "running": (RunStarted(),),
                "completed": (RunStarted(), RunCompleted(result=b"\xc0")),
                "failed": (RunFailed(error=ErrorInfo(type="E", message="m")),),
            }.get(fate, ())
            for world in opened:
                await world.create_run(request)
                if events:
                    await world.commit(
                        CommitRequest(run_id=request.run_id, worker_id="t", events=events)
                    )
                if fate == "cancelled":
                    await world.cancel_run(request.run_id, None)
            record = await opened[1].get_run(request.run_id)
            assert record is not None
            records.append(record)
        for world in opened[1:]:
            await world.close()
        return records

    records = anyio.run(fill)
    yield Populated(urls[1], records, _FIRST_MEMORY.pop(), postgres)
    if postgres is not None:
        drop_schema(postgres)


_FIRST_MEMORY: list[Any] = []

KINDS = ("memory", "sqlite", "postgres")
"""The worlds that must agree with the evaluator."""


@dataclass
class Populated:
    """The SQLite world's URL, the runs, the memory world and the PostgreSQL world's URL."""

    sqlite_url: str
    records: list[RunRecord]
    memory: Any
    postgres_url: str | None = None


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
@given(EXPRESSIONS)
@settings(
    max_examples=full_size(60, 150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
def test_worlds_agree_with_the_evaluator(populated: Populated, kind: str, expr: Expr) -> None:
    """Each world its own test (60 expressions each, 150 at full size), so that they run
    side by side."""
    if kind == "postgres" and populated.postgres_url is None:
        pytest.skip("no PostgreSQL server")
    agree(populated, expr, kinds=(kind,))


def agree(populated: Populated, expr: Expr, kinds: tuple[str, ...] = KINDS) -> None:
    """``list_runs(query=expr)`` on every world of ``kinds`` gives the evaluator's runs,
    newest first."""
    records = sorted(populated.records, key=lambda r: r.id, reverse=True)
    expected = [r.id for r in records if matches(r, expr)]
    urls = [populated.sqlite_url] if "sqlite" in kinds else []
    if populated.postgres_url is not None and "postgres" in kinds:
        urls.append(populated.postgres_url)

    async def ask() -> list[list[str]]:
        answers = []
        memory = [populated.memory] if "memory" in kinds else []
        for world in (*memory, *(worlds.open(url) for url in urls)):
            page = await list_runs(query=expr, limit=1000, world=world)
            answers.append([run.id for run in page])
            if world is not populated.memory:
                await world.close()
        return answers

    for ids in anyio.run(ask):
        assert ids == expected, format(expr)


@pytest.mark.parametrize(
    "text",
    [
        "customer = 'a'",
        "tier > 0 AND customer IN ('a', 'b', 1)",
        "`odd key` STARTS_WITH 'a' OR `a.b` IS NULL",
        "NOT (status = 'pending' OR workflow STARTS_WITH 'bill')",
        "tier >= TIMESTAMP '2024-01-01T12:00:00Z'",
        "closed_at IS NOT NULL AND NOT tier = true",
    ],
)
def test_text_queries_agree(populated: Populated, text: str) -> None:
    agree(populated, parse(text))


# --------------------------------------------------------------------------- PostgreSQL edges

EDGE_VALUES: list[Any] = [
    2**60,
    2**60 + 1,
    float(2**60),
    2**53 + 1,
    float(2**53),
    2**63 - 1,
    -(2**63),
    0,
    -0.0,
    0.1,
    5e-324,
    1e308,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    None,
    "",
    "a",
    "Z",
    "a\u00e9",
    "a\U0001f600",
    "a\uffff",
    NOON,
    NOON + timedelta(microseconds=1),
    NOON - timedelta(microseconds=1),
]
EDGE_FILTERS: list[Expr] = [
    *(
        Compare(AttrRef("v"), op, value)
        for op in ("<", "<=", ">", ">=", "=", "!=")
        for value in (
            2**60,
            2**60 + 1,
            float(2**60),
            2**53 + 1,
            2**63 - 1,
            -(2**63),
            0,
            -0.0,
            0.1,
            5e-324,
            1e308,
            "a",
            "a\0",
            "a\0b",
            "\0",
            "a\u00e9",
            "b",
            NOON,
            NOON + timedelta(microseconds=1),
        )
    ),
    In(AttrRef("v"), (0, "a\0", "a", 0.1)),
    StartsWith(AttrRef("v"), "a"),
    StartsWith(AttrRef("v"), "a\0"),
    IsNull(AttrRef("v")),
    IsNull(AttrRef("k\0")),
    Not(IsNull(AttrRef("k\0"))),
    Compare(AttrRef("k\0"), "=", 1),
    Not(Compare(AttrRef("k\0"), "!=", 1)),
    Compare(FieldRef("workflow"), "<", "w\0"),
    Compare(FieldRef("workflow"), ">=", "w\0"),
    Compare(FieldRef("workflow"), "!=", "w\0"),
    Compare(FieldRef("workflow"), "<", "w\u00e9"),
    StartsWith(FieldRef("workflow"), "w\0"),
    In(FieldRef("workflow"), ("w\0", "wZ")),
]


@pytest.mark.anyio
async def test_postgres_edges_agree_with_the_evaluator(postgres_world_url: str) -> None:
    """Big ints against floats, NaN, infinities, NUL, code point order and microseconds."""
    async with worlds.open(postgres_world_url) as world:
        for n, value in enumerate(EDGE_VALUES):
            workflow = ["w", "wZ", "w\u00e9", "wa"][n % 4]
            await world.create_run(
                CreateRunRequest(
                    run_id=new_run_id(), workflow=workflow, args=b"", attributes={"v": value}
                )
            )
        records = list((await world.list_runs(RunQuery(limit=1000))).runs)
        assert len(records) == len(EDGE_VALUES)
        for expr in EDGE_FILTERS:
            expected = [r.id for r in records if matches(r, expr)]
            page = await world.list_runs(RunQuery(where=expr, limit=1000))
            assert [r.id for r in page.runs] == expected, repr(expr)
            both = And((Compare(AttrRef("v"), "=", 0), expr))
            page = await world.list_runs(RunQuery(where=both, limit=1000))
            assert [r.id for r in page.runs] == [r.id for r in records if matches(r, both)]
