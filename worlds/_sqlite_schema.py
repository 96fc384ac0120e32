"""SQL text, schema and row codecs of the SQLite world (private to ``worlds.sqlite``).

Times are stored as integer microseconds since the Unix epoch, so comparisons in
SQL are exact. Events, attribute maps and claim values are msgpack blobs. Every
statement text here is a constant (or built from a few shapes), so the sqlite3
statement cache keeps them prepared.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, get_args

import msgspec

from worlds.errors import WorldMisconfiguredError
from worlds.query import (
    And,
    AttrRef,
    Compare,
    Expr,
    FieldRef,
    In,
    IsNull,
    Not,
    Or,
    StartsWith,
    check,
)
from worlds.semantics import index_value
from worlds.types import EPOCH, AttributeValue, ErrorInfo, EventKind, RunQuery, RunRecord, RunStatus

SCHEMA_VERSION = 3
"""Stored in ``PRAGMA user_version``; bump it with a migration when the schema changes."""

_CLAIMS_TABLE = """CREATE TABLE {name} (
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        value BLOB NOT NULL,
        run_id TEXT,
        generation INTEGER NOT NULL,
        step INTEGER,
        attempt INTEGER,
        PRIMARY KEY (key, ivalue)
    ) WITHOUT ROWID"""
# A claim whose ``run_id`` is NULL was released (its run was pruned): the pair is
# free, and the row keeps its generation so the next claim gets a higher one.
_CLAIMS_RUN_INDEX = "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL"
# Live hooks only: a run's rows go when it closes, which frees its tokens.
_HOOK_TABLES = (
    """CREATE TABLE hooks (
        token TEXT PRIMARY KEY,
        run_id TEXT NOT NULL,
        hook INTEGER NOT NULL,
        attributes BLOB NOT NULL,
        created_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX hooks_run ON hooks (run_id)",
    """CREATE TABLE hook_resumes (
        token TEXT NOT NULL,
        resume_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        PRIMARY KEY (token, resume_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX hook_resumes_run ON hook_resumes (run_id)",
)
# ``closed_at`` is set exactly when a run closes, so this indexes the closed runs.
_RUNS_CLOSED_INDEX = "CREATE INDEX runs_closed ON runs (closed_at, id) WHERE closed_at IS NOT NULL"

SCHEMA = (
    # rowid table: results and attribute maps can be large, so rows stay out of
    # the interior pages of the primary-key b-tree.
    """CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        closed_at INTEGER,
        last_seq INTEGER NOT NULL,
        attributes BLOB NOT NULL,
        result BLOB,
        error BLOB
    )""",
    "CREATE INDEX runs_workflow ON runs (workflow, id)",
    "CREATE INDEX runs_status ON runs (status, id)",
    _RUNS_CLOSED_INDEX,
    """CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE attributes (
        run_id TEXT NOT NULL,
        key TEXT NOT NULL,
        ivalue TEXT NOT NULL,
        PRIMARY KEY (run_id, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX attributes_value ON attributes (key, ivalue, run_id)",
    _CLAIMS_TABLE.format(name="claims"),
    _CLAIMS_RUN_INDEX,
    """CREATE TABLE work (
        run_id TEXT NOT NULL,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        number INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        payload BLOB NOT NULL,
        available_at INTEGER NOT NULL,
        owner TEXT,
        token INTEGER NOT NULL,
        expires_at INTEGER,
        rewake INTEGER NOT NULL,
        ever_leased INTEGER NOT NULL,
        PRIMARY KEY (run_id, id)
    ) WITHOUT ROWID""",
    # Two partial indexes instead of one on available_at: a lease scan then never
    # walks over items that are leased and still alive.
    "CREATE INDEX work_free ON work (available_at) WHERE owner IS NULL",
    "CREATE INDEX work_leased ON work (expires_at) WHERE owner IS NOT NULL",
    *_HOOK_TABLES,
)

MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 1 -> 2: claims may be released (run_id NULL); indexes for run_claims and prune_runs.
    1: (
        _CLAIMS_TABLE.format(name="claims_v2"),
        "INSERT INTO claims_v2 SELECT key, ivalue, value, run_id, generation, step, attempt "
        "FROM claims",
        "DROP TABLE claims",
        "ALTER TABLE claims_v2 RENAME TO claims",
        _CLAIMS_RUN_INDEX,
        _RUNS_CLOSED_INDEX,
    ),
    # 2 -> 3: hooks and their resume ids.
    2: _HOOK_TABLES,
}
"""The statements that take a database from each older schema version to the next."""

RUN_COLUMNS = (
    "r.id, r.workflow, r.status, r.created_at, r.started_at, r.closed_at, "
    "r.last_seq, r.attributes, r.result, r.error"
)

GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?"
# The run and, when the given lease on one of its items is still held, the
# leased item's kind and rewake flag.
GET_RUN_FOR_COMMIT = (
    f"SELECT {RUN_COLUMNS}, w.kind, w.rewake FROM runs r LEFT JOIN work w "
    "ON w.run_id = ?1 AND w.id = ?2 AND w.owner = ?3 AND w.token = ?4 WHERE r.id = ?1"
)
INSERT_RUN = (
    "INSERT INTO runs (id, workflow, status, created_at, last_seq, attributes) "
    "VALUES (?, ?, 'pending', ?, 1, ?)"
)
UPDATE_RUN = (
    "UPDATE runs SET status = ?, started_at = ?, closed_at = ?, last_seq = ?, "
    "attributes = ?, result = ?, error = ? WHERE id = ?"
)
BUMP_LAST_SEQ = "UPDATE runs SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq"

INSERT_EVENT = "INSERT INTO events (run_id, seq, kind, data) VALUES (?, ?, ?, ?)"
READ_EVENTS = "SELECT data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"

UPSERT_ATTRIBUTE = (
    "INSERT INTO attributes (run_id, key, ivalue) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue"
)

# Claims a free pair: a new row, or a released one whose generation goes up.
CLAIM_IF_FREE = (
    "INSERT INTO claims (key, ivalue, value, run_id, generation) VALUES (?, ?, ?, ?, 1) "
    "ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id, "
    "generation = generation + 1, step = NULL, attempt = NULL WHERE run_id IS NULL"
)
GET_CLAIM = (
    "SELECT run_id, generation, step, attempt, value FROM claims WHERE key = ? AND ivalue = ?"
)
COUNT_RUNS_BY_STATUS = "SELECT status, count(*) FROM runs GROUP BY status"
INSERT_HOOK = (
    "INSERT INTO hooks (token, run_id, hook, attributes, created_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (token) DO NOTHING"
)
GET_HOOK = "SELECT run_id, hook FROM hooks WHERE token = ?"
BIND_HOOK = "UPDATE hooks SET hook = ?, attributes = ? WHERE token = ? AND run_id = ? AND hook = 0"
MOVE_RUN_HOOKS = "UPDATE hooks SET run_id = ?, hook = 0 WHERE run_id = ?"
MOVE_HOOK_RESUMES = (
    "UPDATE hook_resumes SET run_id = ?1 WHERE run_id = ?2 "
    "AND token IN (SELECT token FROM hooks WHERE run_id = ?1)"
)
READ_HOOK_PAYLOADS = (
    "SELECT data FROM events WHERE run_id = ? AND kind = 'hook_received' ORDER BY seq"
)
GET_RESUME = "SELECT run_id FROM hook_resumes WHERE token = ? AND resume_id = ?"
INSERT_RESUME = "INSERT INTO hook_resumes (token, resume_id, run_id) VALUES (?, ?, ?)"
DISPOSE_HOOKS = "DELETE FROM hooks WHERE run_id = ?"
HOOK_COLUMNS = "token, run_id, hook, attributes, created_at"
LIST_HOOKS = f"SELECT {HOOK_COLUMNS} FROM hooks ORDER BY created_at, run_id, hook"
LIST_RUN_HOOKS = f"SELECT {HOOK_COLUMNS} FROM hooks WHERE run_id = ? ORDER BY created_at, hook"
MOVE_RUN_CLAIMS = (
    "UPDATE claims SET run_id = ?, generation = generation + 1 WHERE run_id = ? AND step IS NULL"
)
PUT_CLAIM = (
    "INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key, ivalue) DO UPDATE SET "
    "value = excluded.value, run_id = excluded.run_id, generation = excluded.generation, "
    "step = excluded.step, attempt = excluded.attempt"
)
RUN_CLAIMS = (
    "SELECT key, value, generation, step, attempt FROM claims WHERE run_id = ? ORDER BY key, ivalue"
)

PRUNABLE_RUNS = (
    "SELECT id FROM runs WHERE closed_at IS NOT NULL AND closed_at < ? "
    "ORDER BY closed_at, id LIMIT ?"
)
PRUNE_RUN = (
    "DELETE FROM events WHERE run_id = ?1",
    "DELETE FROM attributes WHERE run_id = ?1",
    "DELETE FROM work WHERE run_id = ?1",
    "DELETE FROM hook_resumes WHERE run_id = ?1",
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL WHERE run_id = ?1",
    "DELETE FROM runs WHERE id = ?1",
)
"""What pruning one closed run takes; each statement has the run id as its parameter."""

_WORK_COLUMNS = (
    "run_id, id, kind, name, number, attempt, payload, available_at, "
    "owner, token, expires_at, rewake, ever_leased"
)
INSERT_WORK_IF_ABSENT = (
    f"INSERT INTO work ({_WORK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) "
    "ON CONFLICT (run_id, id) DO NOTHING"
)
REPLACE_WORK = (
    f"INSERT INTO work ({_WORK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?) "
    "ON CONFLICT (run_id, id) DO UPDATE SET kind = excluded.kind, name = excluded.name, "
    "number = excluded.number, attempt = excluded.attempt, payload = excluded.payload, "
    "available_at = excluded.available_at, owner = excluded.owner, token = excluded.token, "
    "expires_at = excluded.expires_at, rewake = 0, ever_leased = excluded.ever_leased"
)
GET_WORK = (
    "SELECT name, number, attempt, payload, available_at, owner, expires_at "
    "FROM work WHERE run_id = ? AND id = ?"
)
SET_REWAKE = "UPDATE work SET rewake = 1 WHERE run_id = ? AND id = ?"
SET_AVAILABLE = "UPDATE work SET available_at = ? WHERE run_id = ? AND id = ?"
REWAKE_ON_ACK = (
    "UPDATE work SET owner = NULL, expires_at = NULL, rewake = 0, available_at = ? "
    "WHERE run_id = ? AND id = ?"
)
DELETE_WORK = "DELETE FROM work WHERE run_id = ? AND id = ?"
DROP_RUN_WORK = "DELETE FROM work WHERE run_id = ?"
# A cancelling run loses its steps and timers; the step attempts still in flight
# come back so each gets a StepDiscarded.
DROP_CANCELLED_WORK = (
    "DELETE FROM work WHERE run_id = ? AND kind != 'workflow' "
    "RETURNING kind, number, attempt, owner IS NOT NULL AND expires_at > ?"
)
LEASE_WORK = (
    "UPDATE work SET available_at = ?, owner = ?, token = ?, expires_at = ?, attempt = ?, "
    "rewake = 0, ever_leased = 1 WHERE run_id = ? AND id = ?"
)
RENEW_WORK = (
    "UPDATE work SET expires_at = ? WHERE run_id = ? AND id = ? AND owner = ? AND token = ?"
)
RELEASE_WORK = (
    "UPDATE work SET owner = NULL, expires_at = NULL "
    "WHERE run_id = ? AND id = ? AND owner = ? AND token = ?"
)

_DUE_COLUMNS = "run_id, id, kind, name, number, attempt, payload, available_at, ever_leased"


def due_work_sql(name_count: int) -> tuple[str, str]:
    """The two lease scans: free items due by ``available_at``, and expired leases.

    Each takes ``(now, *names, limit)`` and returns rows in lease order.
    """
    names = ", ".join(f"?{n}" for n in range(2, name_count + 2))
    tail = f"AND name IN ({names}) ORDER BY available_at, run_id, id LIMIT ?{name_count + 2}"
    free = f"SELECT {_DUE_COLUMNS} FROM work WHERE owner IS NULL AND available_at <= ?1 {tail}"
    expired = (
        f"SELECT {_DUE_COLUMNS} FROM work WHERE owner IS NOT NULL AND expires_at <= ?1 "
        f"AND available_at <= ?1 {tail}"
    )
    return free, expired


def list_runs_sql(query: RunQuery, before_id: str | None) -> tuple[str, list[object]]:
    """The statement and parameters that list runs matching ``query``, newest first.

    With attribute filters, the first one drives the scan through the
    ``attributes_value`` index in descending run id order (the cursor is a range
    bound on it) and the others are primary-key probes. Without them, several
    statuses become one ``runs_status`` scan each, merged in id order. ``LIMIT``
    is ``query.limit + 1`` so the caller can tell whether another page exists.

    ``query.where`` compiles to a parameterised condition (``where_sql``); its
    top-level ``attribute = value`` terms join the attribute filters, so they
    use the index too.
    """
    filters: list[str] = []
    params: list[object] = []
    if query.where is not None:
        attributes, rest = _index_terms(query.attributes, query.where)
        query = msgspec.structs.replace(query, attributes=attributes, where=rest)
    if query.workflow is not None:
        filters.append("r.workflow = ?")
        params.append(query.workflow)
    if query.created_after is not None:
        filters.append("r.created_at >= ?")
        params.append(to_micros(query.created_after))
    if query.created_before is not None:
        filters.append("r.created_at < ?")
        params.append(to_micros(query.created_before))
    if query.where is not None:
        condition, values = where_sql(query.where)
        filters.append(condition)
        params += values
    statuses = None if query.statuses is None else sorted(s.value for s in query.statuses)
    if query.attributes:
        sql, where, head = _attribute_scan(query, before_id)
        if statuses is not None:
            filters.append(f"r.status IN ({', '.join('?' * len(statuses))})")
            params += statuses
        sql = f"{sql} WHERE {' AND '.join(where + filters)} ORDER BY a.run_id DESC LIMIT ?"
        return sql, [*head, *params, query.limit + 1]
    where, head = [], []
    if before_id is not None:
        where.append("r.id < ?")
        head.append(before_id)
    base = f"SELECT {RUN_COLUMNS} FROM runs r"
    if statuses is None or len(statuses) < 2:
        if statuses is not None:
            filters.append(f"r.status IN ({', '.join('?' * len(statuses))})")
            params += statuses
        clauses = where + filters
        sql = f"{base} WHERE {' AND '.join(clauses)}" if clauses else base
        return f"{sql} ORDER BY r.id DESC LIMIT ?", [*head, *params, query.limit + 1]
    arm = f"{base} WHERE {' AND '.join(['r.status = ?', *where, *filters])}"
    sql = " UNION ALL ".join([arm] * len(statuses)) + " ORDER BY 1 DESC LIMIT ?"
    arms = [value for status in statuses for value in (status, *head, *params)]
    return sql, [*arms, query.limit + 1]


def _attribute_scan(query: RunQuery, before_id: str | None) -> tuple[str, list[str], list[object]]:
    (key, value), *others = query.attributes.items()
    where = ["a.key = ? AND a.ivalue = ?"]
    params: list[object] = [key, index_value(value)]
    if before_id is not None:
        where.append("a.run_id < ?")
        params.append(before_id)
    where.append("r.id = a.run_id")
    for key, value in others:
        where.append(
            "EXISTS (SELECT 1 FROM attributes b "
            "WHERE b.run_id = a.run_id AND b.key = ? AND b.ivalue = ?)"
        )
        params += [key, index_value(value)]
    return f"SELECT {RUN_COLUMNS} FROM attributes a CROSS JOIN runs r", where, params


def _index_terms(attributes: dict[str, Any], where: Expr) -> tuple[dict[str, Any], Expr | None]:
    """Move ``where``'s top-level ``attribute = value`` terms into ``attributes``."""
    check(where)
    merged = dict(attributes)
    rest: list[Expr] = []
    for term in where.items if isinstance(where, And) else (where,):
        indexable = (
            isinstance(term, Compare)
            and term.op == "="
            and isinstance(term.left, AttrRef)
            and term.left.key not in merged
        )
        if indexable:
            assert isinstance(term, Compare) and isinstance(term.left, AttrRef)
            merged[term.left.key] = term.value
        else:
            rest.append(term)
    remaining = None if not rest else rest[0] if len(rest) == 1 else And(tuple(rest))
    return merged, remaining


_FIELD_COLUMNS = {
    "status": "r.status",
    "workflow": "r.workflow",
    "id": "r.id",
    "created_at": "r.created_at",
    "closed_at": "r.closed_at",
}
"""The only column names a filter can reach; values are always bound parameters."""
_SQL_OPERATORS = {"=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ATTRIBUTE_ROW = "SELECT 1 FROM attributes x WHERE x.run_id = r.id AND x.key = ?"
# The numeric value of an int or float attribute (the index text is "i:12", "f:1.5").
_NUMBER_OF = (
    "(CASE WHEN x.ivalue = 'f:inf' THEN 9e999 WHEN x.ivalue = 'f:-inf' THEN -9e999 "
    "WHEN substr(x.ivalue, 1, 2) = 'i:' THEN CAST(substr(x.ivalue, 3) AS INTEGER) "
    "ELSE CAST(substr(x.ivalue, 3) AS REAL) END)"
)


def where_sql(expr: Expr) -> tuple[str, list[object]]:
    """A parameterised SQL condition over ``runs r`` equivalent to ``worlds.query.matches``.

    Column names come from a fixed whitelist and operators from a fixed table;
    every value and attribute key is a bound parameter. The condition is never
    NULL, so ``NOT`` is two-valued like the Python evaluator.

    Raises:
        ValueError: ``expr`` is not a well-formed filter.
        NotImplementedError: a node this world does not know.
    """
    check(expr)
    params: list[object] = []

    def visit(node: Expr) -> str:
        if isinstance(node, (And, Or)):
            joiner = " AND " if isinstance(node, And) else " OR "
            return "(" + joiner.join(visit(item) for item in node.items) + ")"
        if isinstance(node, Not):
            return f"NOT ({visit(node.item)})"
        if isinstance(node, (Compare, In, StartsWith, IsNull)):
            if isinstance(node.left, FieldRef):
                return _field_sql(node, node.left.name, params)
            return _attribute_sql(node, node.left.key, params)
        raise NotImplementedError(f"the SQLite world cannot serve {type(node).__name__} filters")

    return visit(expr), params


def _field_sql(node: Compare | In | StartsWith | IsNull, name: str, params: list[object]) -> str:
    column = _FIELD_COLUMNS[name]

    def bind(value: object) -> object:
        return to_micros(value) if isinstance(value, datetime) else value

    if isinstance(node, IsNull):
        return f"{column} IS NOT NULL" if node.negated else f"{column} IS NULL"
    if isinstance(node, StartsWith):
        params += [len(node.prefix), node.prefix]
        return f"substr({column}, 1, ?) = ?"
    if isinstance(node, Compare):
        params.append(bind(node.value))
        condition = f"{column} {_SQL_OPERATORS[node.op]} ?"
    else:
        params += [bind(value) for value in node.values]
        condition = f"{column} IN ({', '.join('?' * len(node.values))})"
    return f"({column} IS NOT NULL AND {condition})" if name == "closed_at" else condition


def _attribute_sql(node: Compare | In | StartsWith | IsNull, key: str, params: list[object]) -> str:
    params.append(key)
    if isinstance(node, IsNull):
        present = f"EXISTS ({_ATTRIBUTE_ROW} AND x.ivalue != 'n:')"
        return present if node.negated else f"NOT {present}"
    if isinstance(node, StartsWith):
        params += [len(node.prefix) + 2, "s:" + node.prefix]
        condition = "substr(x.ivalue, 1, ?) = ?"
    elif isinstance(node, In):
        params += [index_value(value) for value in node.values]
        condition = f"x.ivalue IN ({', '.join('?' * len(node.values))})"
    elif node.op in ("=", "!="):
        params.append(index_value(node.value))
        condition = f"x.ivalue {_SQL_OPERATORS[node.op]} ?"
    else:
        operator = _SQL_OPERATORS[node.op]
        value = node.value
        if isinstance(value, (int, float)):
            params.append(value)
            condition = f"substr(x.ivalue, 1, 2) IN ('i:', 'f:') AND {_NUMBER_OF} {operator} ?"
        else:
            params.append(index_value(value))
            prefix = "s:" if isinstance(value, str) else "t:"
            condition = f"substr(x.ivalue, 1, 2) = '{prefix}' AND x.ivalue {operator} ?"
    return f"EXISTS ({_ATTRIBUTE_ROW} AND {condition})"


def apply_schema(db: sqlite3.Connection) -> None:
    """Create the schema in an empty database, or migrate an older one in place.

    Refuses a database written by a newer version. Runs inside the caller's
    write transaction, so a migration is all or nothing.
    """
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise WorldMisconfiguredError(
            f"the database has schema version {version}; this runtime knows up to "
            f"{SCHEMA_VERSION}: upgrade the runtime"
        )
    if version == SCHEMA_VERSION:
        return
    if version == 0:
        statements: list[str] = list(SCHEMA)
    else:
        statements = [s for v in range(version, SCHEMA_VERSION) for s in MIGRATIONS[v]]
    for statement in statements:
        db.execute(statement)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


# --------------------------------------------------------------------------- codecs

_MICROSECOND = timedelta(microseconds=1)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (moment - EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the epoch."""
    return EPOCH + timedelta(microseconds=micros)


encode = msgspec.msgpack.Encoder().encode
_decode_attributes = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_error = msgspec.msgpack.Decoder(ErrorInfo).decode
_decode_value = msgspec.msgpack.Decoder(Any).decode

_STATUS = {status.value: status for status in RunStatus}


def decode_value(data: bytes) -> AttributeValue:
    """An attribute value from its msgpack blob."""
    value: AttributeValue = _decode_value(data)
    return value


def decode_attributes(data: bytes) -> dict[str, AttributeValue]:
    """An attribute map from its msgpack blob."""
    attributes: dict[str, AttributeValue] = _decode_attributes(data)
    return attributes


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A ``RunRecord`` from the ``RUN_COLUMNS`` of a row."""
    started, closed, error = row[4], row[5], row[9]
    return RunRecord(
        id=row[0],
        workflow=row[1],
        status=_STATUS[row[2]],
        created_at=from_micros(row[3]),
        started_at=None if started is None else from_micros(started),
        closed_at=None if closed is None else from_micros(closed),
        last_seq=row[6],
        attributes=decode_attributes(row[7]),
        result=row[8],
        error=None if error is None else _decode_error(error),
    )


def run_update_params(run: RunRecord, attributes: bytes) -> tuple[object, ...]:
    """Parameters of ``UPDATE_RUN`` that store ``run`` (``attributes`` pre-encoded)."""
    return (
        run.status.value,
        None if run.started_at is None else to_micros(run.started_at),
        None if run.closed_at is None else to_micros(run.closed_at),
        run.last_seq,
        attributes,
        run.result,
        None if run.error is None else encode(run.error),
        run.id,
    )


_EVENT_DECODER = msgspec.msgpack.Decoder(EventKind)

EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_event(data: bytes) -> EventKind:
    """An event from its msgpack blob."""
    event: EventKind = _EVENT_DECODER.decode(data)
    return event
