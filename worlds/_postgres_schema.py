"""SQL text, migrations and row codecs of the PostgreSQL world (private to ``worlds.postgres``).

Every table lives in the world's schema: connections set ``search_path`` to it,
so the statements here name tables without a schema. Times are ``timestamptz``
(microseconds, like Python's datetimes); events, attribute maps and claim values
are msgpack ``bytea``. There are no foreign keys: every write already goes
through the run row's lock, and pruning deletes a run's rows together.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, get_args

import msgspec

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
from worlds.types import (
    AttributeValue,
    ErrorInfo,
    EventKind,
    HookRecord,
    RunQuery,
    RunRecord,
    RunStatus,
)

SCHEMA_VERSION = 4
"""The newest migration; ``schema_migrations`` records each one applied."""

_WORK_INSERT = """INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
                owner, token, expires_at, ever_leased)"""

# A commit with no claims, hooks, run attributes or continue-as-new, in one
# round trip. Each statement of a plpgsql function sees what committed before
# it started (READ COMMITTED), so once the run row is locked the function reads
# and writes exactly as the multi-statement transaction of the general path.
# Events are stored with seq 0: their seq and at are the columns. The first row
# returned is (outcome, status, last_seq before, at, workflow); outcome is ok,
# missing, closed or lost; the ids of items leased to the committer follow as
# rows ('leased', id, ..).
COMMIT_RUN_FUNCTION = f"""
CREATE FUNCTION commit_run(
    p_run text, p_worker text, p_lease text, p_token bigint, p_ack boolean,
    p_now timestamptz, p_kinds text[], p_data bytea[], p_status text,
    p_started timestamptz, p_closed timestamptz, p_result bytea, p_error bytea,
    p_ids text[], p_wkinds text[], p_names text[], p_numbers integer[],
    p_attempts integer[], p_payloads bytea[], p_available timestamptz[],
    p_lease_asked boolean[], p_tokens bigint[], p_expires timestamptz,
    p_starts bytea[], p_channel text, p_run_channel text
) RETURNS TABLE (outcome text, status text, last_seq integer, at timestamptz, name text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    r record;
    h record;
    w record;
    v_now timestamptz;
    v_seq integer;
    v_lease boolean;
    v_available timestamptz;
    v_notify boolean := false;
BEGIN
    SELECT runs.status, runs.last_seq, runs.last_at, runs.workflow INTO r FROM runs
    WHERE runs.id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'missing', NULL::text, 0, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    IF r.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
        RETURN QUERY SELECT 'closed', r.status, r.last_seq, NULL::timestamptz, NULL::text;
        RETURN;
    END IF;
    IF p_lease IS NOT NULL THEN
        SELECT work.kind, work.rewake INTO h FROM work
        WHERE work.id = p_lease AND work.run_id = p_run AND work.owner = p_worker
          AND work.token = p_token
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'lost', r.status, r.last_seq, NULL::timestamptz, NULL::text;
            RETURN;
        END IF;
    END IF;
    -- times never go back along a run's log, whichever host wrote last
    v_now := greatest(p_now, r.last_at);
    v_seq := r.last_seq;
    INSERT INTO events (run_id, seq, kind, data, at)
    SELECT p_run, v_seq + n, k, d, v_now FROM unnest(p_kinds, p_data) WITH ORDINALITY AS e(k, d, n);
    v_seq := v_seq + coalesce(cardinality(p_kinds), 0);
    IF p_closed IS NOT NULL THEN
        DELETE FROM work WHERE work.run_id = p_run;
        DELETE FROM hooks WHERE hooks.run_id = p_run;
        PERFORM pg_notify(p_run_channel, 'run:' || p_run);
    ELSE
        IF p_lease IS NOT NULL AND p_ack THEN
            IF h.kind = 'workflow' AND h.rewake THEN
                UPDATE work SET owner = NULL, expires_at = NULL, rewake = false,
                    available_at = v_now
                WHERE work.id = p_lease;
                v_notify := true;
            ELSE
                DELETE FROM work WHERE work.id = p_lease;
            END IF;
        END IF;
        FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
            v_lease := p_lease_asked[i] AND p_available[i] <= v_now;
            IF p_wkinds[i] <> 'workflow' THEN
                {_WORK_INSERT}
                VALUES (p_ids[i], p_run, p_wkinds[i], p_names[i], p_numbers[i], p_attempts[i],
                    p_payloads[i], p_available[i], CASE WHEN v_lease THEN p_worker END,
                    CASE WHEN v_lease THEN p_tokens[i] ELSE 0 END,
                    CASE WHEN v_lease THEN p_expires END, v_lease)
                ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name,
                    number = excluded.number, attempt = excluded.attempt,
                    payload = excluded.payload, available_at = excluded.available_at,
                    owner = excluded.owner, token = excluded.token,
                    expires_at = excluded.expires_at, rewake = false,
                    ever_leased = excluded.ever_leased;
                IF NOT v_lease THEN
                    v_notify := true;
                ELSE
                    IF p_wkinds[i] = 'step' THEN
                        v_seq := v_seq + 1;
                        INSERT INTO events (run_id, seq, kind, data, at)
                        VALUES (p_run, v_seq, 'step_started', p_starts[i], v_now);
                    END IF;
                    RETURN QUERY SELECT 'leased', NULL::text, i, NULL::timestamptz, p_names[i];
                END IF;
                CONTINUE;
            END IF;
            {_WORK_INSERT}
            VALUES (p_ids[i], p_run, 'workflow', r.workflow, p_numbers[i], p_attempts[i],
                p_payloads[i], p_available[i], CASE WHEN v_lease THEN p_worker END,
                CASE WHEN v_lease THEN p_tokens[i] ELSE 0 END,
                CASE WHEN v_lease THEN p_expires END, v_lease)
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                -- merge into the run's workflow item
                SELECT work.available_at, work.owner, work.expires_at INTO w FROM work
                WHERE work.id = p_ids[i] FOR UPDATE;
                v_available := least(w.available_at, p_available[i]);
                v_lease := p_lease_asked[i] AND v_available <= v_now;
                IF w.owner IS NOT NULL AND w.expires_at > v_now THEN
                    UPDATE work SET rewake = true WHERE work.id = p_ids[i];
                    CONTINUE;
                ELSIF v_lease THEN
                    UPDATE work SET available_at = v_available, owner = p_worker,
                        token = p_tokens[i], expires_at = p_expires, rewake = false,
                        ever_leased = true
                    WHERE work.id = p_ids[i];
                ELSE
                    UPDATE work SET available_at = v_available WHERE work.id = p_ids[i];
                END IF;
            END IF;
            IF v_lease THEN
                RETURN QUERY SELECT 'leased', NULL::text, i, NULL::timestamptz, r.workflow;
            ELSE
                v_notify := true;
            END IF;
        END LOOP;
    END IF;
    UPDATE runs SET status = coalesce(p_status, runs.status),
        started_at = coalesce(p_started, runs.started_at),
        closed_at = coalesce(p_closed, runs.closed_at), last_seq = v_seq, last_at = v_now,
        result = coalesce(p_result, runs.result), error = coalesce(p_error, runs.error)
    WHERE runs.id = p_run;
    IF v_notify THEN
        PERFORM pg_notify(p_channel, 'work');
    END IF;
    RETURN QUERY SELECT 'ok', coalesce(p_status, r.status), r.last_seq, v_now, r.workflow;
END
$fn$
"""
# Migration 4: the function's time is never later than the server's clock, and
# an item scheduled without a due time (NULL in ``p_available``) is due at it.
_SERVER_NOW = "v_now := greatest(least(p_now, statement_timestamp()), r.last_at);"
_LOOP = "FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP"
COMMIT_RUN_FUNCTION_4 = (
    COMMIT_RUN_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    .replace("v_now := greatest(p_now, r.last_at);", _SERVER_NOW, 1)
    .replace(_LOOP, f"{_LOOP}\n            p_available[i] := coalesce(p_available[i], v_now);", 1)
)
assert _SERVER_NOW in COMMIT_RUN_FUNCTION_4 and "coalesce(p_available[i]" in COMMIT_RUN_FUNCTION_4
COMMIT_RUN = (
    "SELECT * FROM commit_run($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, "
    "$15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)"
)

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE runs (
            id text PRIMARY KEY,
            workflow text NOT NULL,
            status text NOT NULL,
            created_at timestamptz NOT NULL,
            started_at timestamptz,
            closed_at timestamptz,
            last_seq integer NOT NULL,
            attributes bytea NOT NULL,
            result bytea,
            error bytea
        )""",
        "CREATE INDEX runs_workflow ON runs (workflow, id)",
        "CREATE INDEX runs_status ON runs (status, id)",
        "CREATE INDEX runs_closed ON runs (closed_at, id) WHERE closed_at IS NOT NULL",
        """CREATE TABLE events (
            run_id text NOT NULL,
            seq integer NOT NULL,
            kind text NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
        """CREATE TABLE attributes (
            run_id text NOT NULL,
            key text NOT NULL,
            ivalue text NOT NULL,
            PRIMARY KEY (run_id, key)
        )""",
        "CREATE INDEX attributes_value ON attributes (key, ivalue, run_id)",
        # A claim whose run_id is NULL was released (its run was pruned): the
        # pair is free and keeps its generation, so the next claim gets a higher one.
        """CREATE TABLE claims (
            key text NOT NULL,
            ivalue text NOT NULL,
            value bytea NOT NULL,
            run_id text,
            generation bigint NOT NULL,
            step integer,
            attempt integer,
            PRIMARY KEY (key, ivalue)
        )""",
        "CREATE INDEX claims_run ON claims (run_id) WHERE run_id IS NOT NULL",
        """CREATE TABLE work (
            id text PRIMARY KEY,
            run_id text NOT NULL,
            kind text NOT NULL,
            name text NOT NULL,
            number integer NOT NULL,
            attempt integer NOT NULL,
            payload bytea NOT NULL,
            available_at timestamptz NOT NULL,
            owner text,
            token bigint NOT NULL,
            expires_at timestamptz,
            rewake boolean NOT NULL DEFAULT false,
            ever_leased boolean NOT NULL
        )""",
        "CREATE INDEX work_run ON work (run_id)",
        "CREATE INDEX work_free ON work (name, available_at) WHERE owner IS NULL",
        "CREATE INDEX work_leased ON work (name, expires_at) WHERE owner IS NOT NULL",
    ),
    # Hooks: a live hook holds its token while its run is open.
    2: (
        """CREATE TABLE hooks (
            token text PRIMARY KEY,
            run_id text NOT NULL,
            hook integer NOT NULL,
            attributes bytea NOT NULL,
            created_at timestamptz NOT NULL
        )""",
        "CREATE INDEX hooks_run ON hooks (run_id)",
        # Deliveries by resume id, kept after the run closes (until it is pruned)
        # so a retried delivery keeps its answer.
        """CREATE TABLE hook_resumes (
            token text NOT NULL,
            resume_id text NOT NULL,
            run_id text NOT NULL,
            PRIMARY KEY (token, resume_id)
        )""",
        "CREATE INDEX hook_resumes_run ON hook_resumes (run_id)",
    ),
    # Events get their time as a column, and statements that append them without
    # knowing the run's last sequence number store them with seq 0: the columns
    # then give the event's seq and at (see ``decode_event``). ``commit_run`` is
    # a commit in one round trip.
    3: (
        "ALTER TABLE events ADD COLUMN at timestamptz",
        "ALTER TABLE runs ADD COLUMN last_at timestamptz",
        COMMIT_RUN_FUNCTION,
    ),
    # One clock: ``commit_run`` never takes a time later than the server's, so a
    # committer whose clock runs fast neither leases a timer early nor counts a
    # live lease as expired.
    4: (COMMIT_RUN_FUNCTION_4,),
}
"""The statements of each schema version, applied in order to reach it."""

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def check_schema_name(name: str) -> str:
    """``name`` if it is a plain identifier PostgreSQL keeps as written, else ``ValueError``."""
    if not _SCHEMA_NAME.fullmatch(name):
        raise ValueError(f"schema name {name!r} must match {_SCHEMA_NAME.pattern}")
    return name


def quote(name: str) -> str:
    """``name`` as a quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def lock_key(schema: str) -> int:
    """The advisory lock that serializes migrations of ``schema`` (a signed 64-bit int)."""
    digest = hashlib.blake2b(f"workflow-migrate:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def channel(schema: str, what: str = "work") -> str:
    """The LISTEN/NOTIFY channel of ``what`` (``work`` or ``runs``) of the worlds in
    ``schema`` (at most 63 bytes).

    Work and run topics have channels of their own, so a process listens only to
    what it waits for: workers hear no run closing, clients no queued work.
    """
    name = f"workflow.{what}.{schema}"
    if len(name) <= 63:
        return name
    return f"workflow.{what}." + hashlib.blake2b(schema.encode(), digest_size=16).hexdigest()


def migration_statements(schema: str) -> tuple[str, ...]:
    """Statements run before migrating, in the migrating transaction."""
    return (
        f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}",
        f"CREATE TABLE IF NOT EXISTS {quote(schema)}.schema_migrations ("
        "version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
    )


APPLIED_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"
RECORD_VERSION = "INSERT INTO schema_migrations (version) VALUES ($1)"

# ---------------------------------------------------------------------------- runs

RUN_COLUMNS = (
    "r.id, r.workflow, r.status, r.created_at, r.started_at, r.closed_at, "
    "r.last_seq, r.attributes, r.result, r.error, r.last_at"
)
GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = $1"
LOCK_RUN = f"{GET_RUN} FOR UPDATE"
LOCK_LEASE = (
    "SELECT kind, rewake FROM work "
    "WHERE id = $1 AND run_id = $2 AND owner = $3 AND token = $4 FOR UPDATE"
)

# A new run with its attributes, RunCreated event and workflow item, and the
# notification that work is due, in one statement (data-modifying CTEs all run,
# in one snapshot; notifications are delivered at commit).
CREATE_RUN = """
WITH new_run AS (
    INSERT INTO runs (id, workflow, status, created_at, last_seq, last_at, attributes)
    VALUES ($1, $2, 'pending', $3, 1, $3, $4)
), new_attributes AS (
    INSERT INTO attributes (run_id, key, ivalue)
    SELECT $1, k, v FROM unnest($5::text[], $6::text[]) AS a(k, v)
    ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue
), new_event AS (
    INSERT INTO events (run_id, seq, kind, data, at) VALUES ($1, 1, 'run_created', $7, $3)
), new_work AS (
    INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at, token,
                      ever_leased)
    VALUES ($8, $1, 'workflow', $2, 0, 1, '', $3, 0, false)
    ON CONFLICT (id) DO NOTHING
)
SELECT pg_notify($9, 'work')
"""

# Appends events and stores the run's new state; a closed run loses its work and hooks.
SAVE_RUN = """
WITH new_events AS (
    INSERT INTO events (run_id, seq, kind, data, at)
    SELECT $8, s, k, d, $12 FROM unnest($9::integer[], $10::text[], $11::bytea[]) AS e(s, k, d)
), dropped_work AS (
    DELETE FROM work WHERE run_id = $8 AND $3::timestamptz IS NOT NULL
), dropped_hooks AS (
    DELETE FROM hooks WHERE run_id = $8 AND $3::timestamptz IS NOT NULL
)
UPDATE runs SET status = $1, started_at = $2, closed_at = $3, last_seq = $4,
    attributes = $5, result = $6, error = $7, last_at = greatest(last_at, $12)
WHERE id = $8
"""

READ_EVENTS = "SELECT seq, at, data FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq"
COUNT_RUNS_BY_STATUS = "SELECT status, count(*) FROM runs GROUP BY status"

UPSERT_ATTRIBUTES = """
INSERT INTO attributes (run_id, key, ivalue)
SELECT $1, k, v FROM unnest($2::text[], $3::text[]) AS a(k, v)
ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue
"""

# Work topics go to the work channel, run topics to the runs channel.
NOTIFY = (
    "SELECT pg_notify(CASE WHEN topic = 'work' THEN $1 ELSE $2 END, topic) "
    "FROM unnest($3::text[]) AS t(topic)"
)

# --------------------------------------------------------------------------- claims

# Claims a free pair (a new row, or a released one whose generation goes up);
# no row comes back when another run holds it, and the held row is then locked.
CLAIM_IF_FREE = """
INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt)
VALUES ($1, $2, $3, $4, 1, $5, $6)
ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id,
    generation = claims.generation + 1, step = excluded.step, attempt = excluded.attempt
WHERE claims.run_id IS NULL
RETURNING generation
"""
GET_CLAIM = (
    "SELECT run_id, generation, step, attempt, value FROM claims WHERE key = $1 AND ivalue = $2"
)
LOCK_CLAIM = f"{GET_CLAIM} FOR UPDATE"
PUT_CLAIM = """
INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id,
    generation = excluded.generation, step = excluded.step, attempt = excluded.attempt
"""
MOVE_RUN_CLAIMS = (
    "UPDATE claims SET run_id = $1, generation = generation + 1 WHERE run_id = $2 AND step IS NULL"
)
RUN_CLAIMS = (
    "SELECT key, value, generation, step, attempt FROM claims WHERE run_id = $1 "
    "ORDER BY key, ivalue"
)

INSERT_HOOK = """
INSERT INTO hooks (token, run_id, hook, attributes, created_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (token) DO NOTHING RETURNING run_id
"""
HOOK_HOLDER = "SELECT run_id, hook FROM hooks WHERE token = $1"
BIND_HOOK = """
UPDATE hooks SET hook = $1, attributes = $2 WHERE token = $3 AND run_id = $4 AND hook = 0
RETURNING run_id
"""
MOVE_RUN_HOOKS = "UPDATE hooks SET run_id = $1, hook = 0 WHERE run_id = $2"
MOVE_HOOK_RESUMES = """
UPDATE hook_resumes SET run_id = $1 WHERE run_id = $2
AND token IN (SELECT token FROM hooks WHERE run_id = $1)
"""
READ_HOOK_PAYLOADS = (
    "SELECT data FROM events WHERE run_id = $1 AND kind = 'hook_received' ORDER BY seq"
)
RECORD_RESUME = (
    "INSERT INTO hook_resumes (token, resume_id, run_id) VALUES ($1, $2, $3) "
    "ON CONFLICT DO NOTHING RETURNING run_id"
)
RESUMED = "SELECT run_id FROM hook_resumes WHERE token = $1 AND resume_id = $2"
_HOOK_COLUMNS = "SELECT token, run_id, hook, attributes, created_at FROM hooks"
LIST_HOOKS = f"{_HOOK_COLUMNS} ORDER BY created_at, run_id, hook"
LIST_RUN_HOOKS = f"{_HOOK_COLUMNS} WHERE run_id = $1 ORDER BY created_at, run_id, hook"

PRUNE = """
WITH doomed AS (
    SELECT id, closed_at FROM runs
    WHERE closed_at IS NOT NULL AND closed_at < $1
    ORDER BY closed_at, id LIMIT $2 FOR UPDATE SKIP LOCKED
), gone_events AS (
    DELETE FROM events WHERE run_id IN (SELECT id FROM doomed)
), gone_attributes AS (
    DELETE FROM attributes WHERE run_id IN (SELECT id FROM doomed)
), gone_work AS (
    DELETE FROM work WHERE run_id IN (SELECT id FROM doomed)
), gone_hooks AS (
    DELETE FROM hooks WHERE run_id IN (SELECT id FROM doomed)
), gone_resumes AS (
    DELETE FROM hook_resumes WHERE run_id IN (SELECT id FROM doomed)
), released AS (
    UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL
    WHERE run_id IN (SELECT id FROM doomed)
)
DELETE FROM runs WHERE id IN (SELECT id FROM doomed) RETURNING id, closed_at
"""

# ----------------------------------------------------------------------------- work

_WORK_COLUMNS = (
    "id, run_id, kind, name, number, attempt, payload, available_at, owner, token, "
    "expires_at, ever_leased"
)
INSERT_WORK_IF_ABSENT = (
    f"INSERT INTO work ({_WORK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
    "$11, $12) ON CONFLICT (id) DO NOTHING RETURNING id"
)
REPLACE_WORK = (
    f"INSERT INTO work ({_WORK_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
    "$11, $12) ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name, "
    "number = excluded.number, attempt = excluded.attempt, payload = excluded.payload, "
    "available_at = excluded.available_at, owner = excluded.owner, token = excluded.token, "
    "expires_at = excluded.expires_at, rewake = false, ever_leased = excluded.ever_leased"
)
LOCK_WORK = (
    "SELECT name, number, attempt, payload, available_at, owner, expires_at "
    "FROM work WHERE id = $1 FOR UPDATE"
)
SET_REWAKE = "UPDATE work SET rewake = true WHERE id = $1"
SET_AVAILABLE = "UPDATE work SET available_at = $2 WHERE id = $1"
REWAKE_ON_ACK = (
    "UPDATE work SET owner = NULL, expires_at = NULL, rewake = false, available_at = $2 "
    "WHERE id = $1"
)
DELETE_WORK = "DELETE FROM work WHERE id = $1"
# A cancelling run's steps and timers go; each says whether an attempt was in flight.
DROP_CANCELLED_WORK = """
DELETE FROM work WHERE run_id = $1 AND kind IN ('step', 'timer')
RETURNING kind, number, attempt, (owner IS NOT NULL AND expires_at > $2)
"""
LEASE_ONE = (
    "UPDATE work SET available_at = $2, owner = $3, token = $4, expires_at = $5, attempt = $6, "
    "rewake = false, ever_leased = true WHERE id = $1"
)
# Leases due items in one statement: locks them and their runs (rows another
# transaction holds are skipped, so leasing never waits), takes the leases with
# fresh tokens, and appends StepStarted for each step (seq 0 in the data: the
# columns give seq and at; the data is built here from ``STEP_STARTED_PARTS``).
LEASE = """
WITH due AS (
    SELECT w.id, r.last_seq, greatest($2, r.last_at) AS at
    FROM work w JOIN runs r ON r.id = w.run_id
    WHERE w.name = ANY($1::text[]) AND w.available_at <= least($2, statement_timestamp())
      AND (w.owner IS NULL OR w.expires_at <= least($2, statement_timestamp()))
    ORDER BY w.available_at, w.run_id, w.id
    LIMIT $3
    FOR UPDATE OF w, r SKIP LOCKED
), leased AS (
    UPDATE work w SET owner = $4, expires_at = $5,
        token = 1 + floor(random() * 4611686018427387903)::bigint,
        attempt = w.attempt + (w.kind = 'step' AND w.ever_leased)::integer,
        rewake = false, ever_leased = true
    FROM due WHERE w.id = due.id
    RETURNING w.id, w.run_id, w.kind, w.name, w.number, w.attempt, w.payload, w.token,
        due.last_seq, due.at
), started AS (
    SELECT l.run_id, l.number, l.attempt, l.at,
        l.last_seq + row_number() OVER (PARTITION BY l.run_id ORDER BY l.id)::integer AS seq
    FROM leased l WHERE l.kind = 'step'
), new_events AS (
    INSERT INTO events (run_id, seq, kind, data, at)
    SELECT s.run_id, s.seq, 'step_started',
        $6::bytea || int4send(s.number) || $7::bytea || int4send(s.attempt), s.at
    FROM started s
), bumped AS (
    UPDATE runs SET last_seq = m.seq, last_at = m.at
    FROM (SELECT run_id, max(seq) AS seq, max(at) AS at FROM started GROUP BY run_id) AS m
    WHERE runs.id = m.run_id
)
SELECT id, run_id, kind, name, number, attempt, payload, token FROM leased
ORDER BY run_id, id
"""
RENEW = """
UPDATE work SET expires_at = $1
FROM unnest($2::text[], $3::bigint[]) AS held(id, token)
WHERE work.id = held.id AND work.token = held.token AND work.owner = $4
RETURNING work.id, work.token
"""
RELEASE = """
WITH released AS (
    UPDATE work SET owner = NULL, expires_at = NULL
    FROM unnest($1::text[], $2::bigint[]) AS held(id, token)
    WHERE work.id = held.id AND work.token = held.token AND work.owner = $3
)
SELECT pg_notify($4, $5)
"""


def list_runs_sql(query: RunQuery, before_id: str | None) -> tuple[str, list[object]]:
    """The statement and parameters listing runs that match ``query``, newest first.

    With attribute filters (``query.attributes`` and the top-level
    ``attribute = value`` terms of ``query.where``), the first one drives the
    scan through the ``attributes_value`` index in descending run id order (the
    cursor is a range bound on it); the others are probes. The rest of
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
        attributes, rest = _index_terms(attributes, rest)
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


def _index_terms(attributes: dict[str, Any], where: Expr) -> tuple[dict[str, Any], Expr | None]:
    """Move ``where``'s top-level ``attribute = value`` terms into ``attributes``."""
    check(where)
    merged = dict(attributes)
    rest: list[Expr] = []
    for term in where.items if isinstance(where, And) else (where,):
        if (
            isinstance(term, Compare)
            and term.op == "="
            and isinstance(term.left, AttrRef)
            and term.left.key not in merged
            and not _unstorable(term.left.key, index_value(term.value))
        ):
            merged[term.left.key] = term.value
        else:
            rest.append(term)
    remaining = None if not rest else rest[0] if len(rest) == 1 else And(tuple(rest))
    return merged, remaining


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


# --------------------------------------------------------------------------- codecs

encode = msgspec.msgpack.Encoder().encode
_decode_attributes = msgspec.msgpack.Decoder(dict[str, Any]).decode
_decode_error = msgspec.msgpack.Decoder(ErrorInfo).decode
_decode_value = msgspec.msgpack.Decoder(Any).decode
_decode_event = msgspec.msgpack.Decoder(EventKind).decode
_STATUS = {status.value: status for status in RunStatus}

EVENT_TAGS: dict[type, str] = {cls: cls.__struct_config__.tag for cls in get_args(EventKind)}
"""The ``kind`` column of each event type."""


def decode_value(data: bytes) -> AttributeValue:
    """An attribute value from its msgpack bytes."""
    value: AttributeValue = _decode_value(data)
    return value


def decode_event(data: bytes, seq: int = 0, at: datetime | None = None) -> EventKind:
    """An event from its msgpack bytes; one stored with seq 0 takes ``seq`` and ``at``."""
    event: EventKind = _decode_event(data)
    if event.seq == 0 and at is not None:
        event = msgspec.structs.replace(event, seq=seq, at=at)
    return event


def _step_started_parts() -> tuple[bytes, bytes]:
    """The bytes around step and attempt (big-endian int32s) of a StepStarted."""
    key = msgspec.msgpack.encode
    head = b"\x83" + key("kind") + key("step_started") + key("step") + b"\xd2"
    return head, key("attempt") + b"\xd2"


STEP_STARTED_PARTS = _step_started_parts()
"""``LEASE`` builds a StepStarted as ``head || int4(step) || middle || int4(attempt)``."""


def hook_from_row(row: Sequence[Any]) -> HookRecord:
    """A ``HookRecord`` from a row of ``LIST_HOOKS``."""
    return HookRecord(
        token=row[0],
        run_id=row[1],
        hook=row[2],
        attributes=_decode_attributes(row[3]),
        created_at=row[4],
    )


def run_from_row(row: Sequence[Any]) -> RunRecord:
    """A ``RunRecord`` from the ``RUN_COLUMNS`` of a row."""
    error = row[9]
    return RunRecord(
        id=row[0],
        workflow=row[1],
        status=_STATUS[row[2]],
        created_at=row[3],
        started_at=row[4],
        closed_at=row[5],
        last_seq=row[6],
        attributes=_decode_attributes(row[7]),
        result=row[8],
        error=None if error is None else _decode_error(error),
    )


def save_params(
    run: RunRecord, attributes: bytes, events: Sequence[tuple[int, str, bytes]], at: datetime
) -> tuple[object, ...]:
    """Parameters of ``SAVE_RUN`` storing ``run`` and appending ``events`` (seq, kind, data)."""
    closed: datetime | None = run.closed_at if run.status.is_closed else None
    return (
        run.status.value,
        run.started_at,
        closed,
        run.last_seq,
        attributes,
        run.result,
        None if run.error is None else encode(run.error),
        run.id,
        [seq for seq, _, _ in events],
        [kind for _, kind, _ in events],
        [data for _, _, data in events],
        at,
    )
