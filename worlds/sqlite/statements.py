"""SQL text of the SQLite world's operations.

Every statement text here is a constant (or built from a few shapes), so the
sqlite3 statement cache keeps them prepared.
"""

from __future__ import annotations

import functools
import re

RUN_COLUMNS = (
    "r.id, r.workflow, r.status, r.created_at, r.started_at, r.closed_at, "
    "r.last_seq, r.attributes, r.result, r.error, r.build_id, r.pin, r.admitted_at"
)

GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = ?"
RUN_EXISTS = "SELECT 1 FROM runs WHERE id = ?"
# The open runs whose attribute ?1 has index value ?2 (a run's children, by $parent).
# ``+r.status``: the children are found through the attribute index. Without the
# unary plus, SQLite's planner (no statistics) walks every open run by status and
# probes its attributes: closing each of n open runs (a bulk cancel) then read n
# runs under the write lock (2.5 ms a run at 5,000 open runs; RFC 0023).
OPEN_CHILDREN = (
    f"SELECT {RUN_COLUMNS} FROM attributes a JOIN runs r ON r.id = a.run_id "
    "WHERE a.key = ?1 AND a.ivalue = ?2 "
    "AND +r.status IN ('pending', 'running', 'cancelling') ORDER BY r.id"
)
# Whether a run has slots (or places in line), windowed claims and hook tokens:
# what closing it must free. Three index probes.
_HOLDINGS = (
    "EXISTS (SELECT 1 FROM slots WHERE run_id = ?1) AS has_slots, "
    "EXISTS (SELECT 1 FROM claims WHERE run_id = ?1 "
    "AND (ttl IS NOT NULL OR release_on IS NOT NULL)) AS has_windowed, "
    "EXISTS (SELECT 1 FROM hooks WHERE run_id = ?1) AS has_hooks"
)
RUN_HOLDINGS = f"SELECT {_HOLDINGS}"


@functools.cache
def run_for_commit(*, closing: bool, later: bool) -> str:
    """The run and, when the given lease (?2-?4) on one of its items is still held,
    the leased item's kind and rewake flag: a commit's first read, one statement.

    ``closing``: with the run's holdings (``_HOLDINGS``), for a commit that closes it.
    ``later``: one row per event of the run after number ?5 (``later``, its data; one
    row with ``later`` NULL when there is none), in order, for a conditional commit's
    look at what it has not seen."""
    columns = f"{RUN_COLUMNS}, w.kind, w.rewake"
    joins = "LEFT JOIN work w ON w.run_id = ?1 AND w.id = ?2 AND w.owner = ?3 AND w.token = ?4"
    order = ""
    if closing:
        columns += f", {_HOLDINGS}"
    if later:
        columns += ", e.data AS later"
        joins += " LEFT JOIN events e ON e.run_id = ?1 AND e.seq > ?5"
        order = " ORDER BY e.seq"
    return f"SELECT {columns} FROM runs r {joins} WHERE r.id = ?1{order}"


INSERT_RUN = (
    "INSERT INTO runs (id, workflow, status, created_at, last_seq, attributes, admitted_at) "
    "VALUES (?, ?, 'pending', ?, 1, ?, ?)"
)
# A new run stored once, in the state its first save gave it (``insert_run``
# with ``saved_next``): its creation and first task in one row write.
INSERT_SAVED_RUN = (
    "INSERT INTO runs (id, workflow, status, created_at, started_at, closed_at, last_seq, "
    "attributes, result, error, admitted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SET_ADMITTED = "UPDATE runs SET admitted_at = ? WHERE id = ?"
UPDATE_RUN = (
    "UPDATE runs SET status = ?, started_at = ?, closed_at = ?, last_seq = ?, "
    "attributes = ?, result = ?, error = ? WHERE id = ?"
)
# The common commit: the attributes did not change, so their blob is not written.
UPDATE_RUN_STATE = (
    "UPDATE runs SET status = ?, started_at = ?, closed_at = ?, last_seq = ?, "
    "result = ?, error = ? WHERE id = ?"
)


@functools.lru_cache(maxsize=4096)
def names_table(statement: str, table: str) -> bool:
    """Whether ``statement`` names ``table`` (each text is looked at once)."""
    return re.search(rf"\b{table}\b", statement) is not None


BUMP_LAST_SEQ = "UPDATE runs SET last_seq = last_seq + ? WHERE id = ? RETURNING last_seq"

INSERT_EVENT = "INSERT INTO events (run_id, seq, kind, data) VALUES (?, ?, ?, ?)"
EVENTS_PER_INSERT = 200
"""Event rows per multi-row ``INSERT`` (800 parameters, far below SQLite's limit)."""


@functools.cache
def insert_events(count: int) -> str:
    """One ``INSERT`` of ``count`` event rows (the text cached: the connection's
    statement cache then prepares it once)."""
    return INSERT_EVENT + ", (?, ?, ?, ?)" * (count - 1)


READ_EVENTS = "SELECT data FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"

UPSERT_ATTRIBUTE = (
    "INSERT INTO attributes (run_id, key, ivalue) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue"
)

# Claims a free pair: a new row, or a released one whose generation goes up;
# no row comes back when another run holds it.
CLAIM_IF_FREE = (
    "INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt, ttl, release_on) "
    "VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?) "
    "ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id, "
    "generation = generation + 1, step = excluded.step, attempt = excluded.attempt, "
    "ttl = excluded.ttl, release_on = excluded.release_on, lapses_at = NULL, "
    "pruned_status = NULL WHERE run_id IS NULL RETURNING generation"
)
CLAIM_COLUMNS = (
    "key, value, run_id, generation, step, attempt, ttl, release_on, lapses_at, pruned_status"
)
GET_CLAIM = f"SELECT {CLAIM_COLUMNS} FROM claims WHERE key = ? AND ivalue = ?"
COUNT_RUNS_BY_STATUS = "SELECT status, count(*) AS runs FROM runs GROUP BY status"
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
INSERT_RESUME = (
    "INSERT INTO hook_resumes (token, resume_id, run_id) VALUES (?, ?, ?) "
    "ON CONFLICT (token, resume_id) DO NOTHING"
)
DISPOSE_HOOKS = "DELETE FROM hooks WHERE run_id = ?"
GET_UPDATE = "SELECT seq FROM updates WHERE run_id = ? AND update_id = ?"
INSERT_UPDATE = (
    "INSERT INTO updates (run_id, update_id, seq) VALUES (?, ?, ?) "
    "ON CONFLICT (run_id, update_id) DO NOTHING"
)
HOOK_COLUMNS = "token, run_id, hook, attributes, created_at"
LIST_HOOKS = f"SELECT {HOOK_COLUMNS} FROM hooks ORDER BY created_at, run_id, hook"
LIST_RUN_HOOKS = f"SELECT {HOOK_COLUMNS} FROM hooks WHERE run_id = ? ORDER BY created_at, hook"
MOVE_RUN_CLAIMS = (
    "UPDATE claims SET run_id = ?, generation = generation + 1 WHERE run_id = ? AND step IS NULL"
)
PUT_CLAIM = (
    "INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt, ttl, "
    "release_on) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key, ivalue) DO UPDATE SET "
    "value = excluded.value, run_id = excluded.run_id, generation = excluded.generation, "
    "step = excluded.step, attempt = excluded.attempt, ttl = excluded.ttl, "
    "release_on = excluded.release_on, lapses_at = NULL, pruned_status = NULL"
)
RUN_CLAIMS = (
    f"SELECT {CLAIM_COLUMNS} FROM claims WHERE run_id = ? "
    "AND (lapses_at IS NULL OR lapses_at > ?) ORDER BY key, ivalue"
)
# The claims of a closing run that have a reuse window to apply.
WINDOWED_CLAIMS = (
    "SELECT key, ivalue, ttl, release_on FROM claims WHERE run_id = ? "
    "AND (ttl IS NOT NULL OR release_on IS NOT NULL)"
)
RELEASE_CLAIM = (
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL, "
    "pruned_status = NULL WHERE key = ? AND ivalue = ?"
)
SET_LAPSES_AT = "UPDATE claims SET lapses_at = ? WHERE key = ? AND ivalue = ?"
RELEASE_LAPSED_CLAIMS = (
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL, "
    "pruned_status = NULL WHERE lapses_at IS NOT NULL AND lapses_at <= ?"
)

# A pinned run holds the attribute $pinned (worlds._rules.retention.PIN_KEY).
PRUNABLE_RUNS = (
    "SELECT id FROM runs WHERE closed_at IS NOT NULL AND closed_at < ?1 "
    "AND (?3 IS NULL OR status = ?3) AND NOT EXISTS (SELECT 1 FROM attributes "
    "WHERE attributes.run_id = runs.id AND attributes.key = '$pinned') "
    "ORDER BY closed_at, id LIMIT ?2"
)
DROP_ATTRIBUTE = "DELETE FROM attributes WHERE run_id = ? AND key = ?"
NEXT_STREAM_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM streams WHERE run_id = ? AND name = ?"
INSERT_STREAM = "INSERT INTO streams (run_id, name, seq, data, at) VALUES (?, ?, ?, ?, ?)"
CLOSE_STREAM = (
    "INSERT INTO streams (run_id, name, seq, data, at) VALUES (?, ?, -1, x'', ?) "
    "ON CONFLICT DO NOTHING"
)
"""A stream's close is its row at offset -1: below every chunk, so no read of chunks
(offsets from 0) meets it and the next offset stays max(seq) + 1."""
STREAM_CLOSED = "SELECT 1 FROM streams WHERE run_id = ? AND name = ? AND seq = -1"
READ_STREAM = (
    "SELECT seq, data, at FROM streams WHERE run_id = ? AND name = ? AND seq >= ? "
    "ORDER BY seq LIMIT ?"
)
PRUNE_RUN = (
    "DELETE FROM events WHERE run_id = ?1",
    "DELETE FROM attributes WHERE run_id = ?1",
    "DELETE FROM work WHERE run_id = ?1",
    "DELETE FROM hook_resumes WHERE run_id = ?1",
    "DELETE FROM updates WHERE run_id = ?1",
    "DELETE FROM streams WHERE run_id = ?1",
    "DELETE FROM runs WHERE id = ?1",
)
"""What pruning one closed run takes; each statement has the run id as its parameter."""
RELEASE_RUN_CLAIMS = (
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL, "
    "pruned_status = NULL WHERE run_id = ?1"
)
TOMBSTONE_RUN_CLAIMS = (
    "UPDATE claims SET step = NULL, attempt = NULL, "
    "pruned_status = (SELECT status FROM runs WHERE id = ?1) WHERE run_id = ?1"
)
"""Pruning a run keeps its claims as tombstones (or releases them); before ``PRUNE_RUN``."""
RELEASE_TOMBSTONES = (
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL, "
    "pruned_status = NULL WHERE pruned_status IS NOT NULL"
)

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
    "SELECT name, number, attempt, payload, available_at, owner, expires_at, ever_leased "
    "FROM work WHERE run_id = ? AND id = ?"
)
SET_REWAKE = "UPDATE work SET rewake = 1 WHERE run_id = ? AND id = ?"
SET_AVAILABLE = "UPDATE work SET available_at = ? WHERE run_id = ? AND id = ?"
REWAKE_ON_ACK = (
    "UPDATE work SET owner = NULL, expires_at = NULL, rewake = 0, available_at = ? "
    "WHERE run_id = ? AND id = ?"
)
DELETE_WORK = "DELETE FROM work WHERE run_id = ? AND id = ?"
# A deleted item's row made into a new item of its run (REPLACE_WORK's values
# after the run id, then the run id and the deleted item's id).
REUSE_WORK = (
    "UPDATE work SET id = ?, kind = ?, name = ?, number = ?, attempt = ?, payload = ?, "
    "available_at = ?, owner = ?, token = ?, expires_at = ?, rewake = 0, ever_leased = ? "
    "WHERE run_id = ? AND id = ?"
)
# Who holds an item's lease now (named when a commit lost it).
LEASE_HOLDER = "SELECT owner FROM work WHERE run_id = ? AND id = ?"
DROP_RUN_WORK = "DELETE FROM work WHERE run_id = ?"
# A cancelling run loses its steps and timers; the step attempts still in flight
# come back so each gets a StepDiscarded.
DROP_CANCELLED_WORK = (
    "DELETE FROM work WHERE run_id = ? AND kind != 'workflow' "
    "RETURNING kind, number, attempt, owner IS NOT NULL AND expires_at > ? AS in_flight"
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

_DUE_COLUMNS = (
    "run_id, id, kind, name, number, attempt, payload, available_at, ever_leased, owner, expires_at"
)

# ---------------------------------------------------------------------------- workers

WORKERS = "SELECT * FROM workers"
WORKER = "SELECT * FROM workers WHERE id = ?"
PUT_WORKER = "INSERT OR REPLACE INTO workers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
DROP_WORKERS = "DELETE FROM workers WHERE last_beat < ?"
REVOKE_LEASES = "UPDATE work SET owner = NULL, expires_at = NULL WHERE owner = ?"


# Pinned deployments (RFC 0025).
# Whether leases must look at builds: a worker registered with one, or a run recorded one.
BUILDS_IN_USE = (
    "SELECT EXISTS (SELECT 1 FROM workers WHERE build_id IS NOT NULL) "
    "OR EXISTS (SELECT 1 FROM runs INDEXED BY runs_build WHERE build_id IS NOT NULL)"
)
DEPLOYMENT = "SELECT workflow, pin, registered_at FROM deployments WHERE build_id = ?"
DEPLOYMENTS = "SELECT build_id, workflow, pin, registered_at FROM deployments"
DROP_DEPLOYMENT = "DELETE FROM deployments WHERE build_id = ?"
PUT_DEPLOYMENT = "INSERT INTO deployments VALUES (?, ?, ?, ?)"
SET_RUN_BUILD = "UPDATE runs SET build_id = ?, pin = ? WHERE id = ?"
OPEN_RUNS_BY_BUILD = (
    "SELECT build_id, pin, count(*) AS runs FROM runs INDEXED BY runs_build "
    "WHERE build_id IS NOT NULL AND status IN ('pending', 'running') GROUP BY build_id, pin"
)


def run_builds_sql(count: int) -> str:
    """The builds ``count`` runs recorded (``*run_ids``)."""
    marks = ", ".join("?" * count)
    return f"SELECT id, workflow, build_id, pin FROM runs WHERE id IN ({marks})"


def due_work_sql(name_count: int, builds: bool = False) -> tuple[str, str]:
    """The two lease scans: free items due by ``available_at``, and expired leases.

    Each takes ``(now, *names, limit)`` and returns rows in lease order; with
    ``builds``, also ``(build, newest)``: only items of runs a worker of ``build``
    may lease (``worlds._rules.deployments.may_lease`` in SQL, RFC 0025).
    """
    names = ", ".join(f"?{n}" for n in range(2, name_count + 2))
    build, top = f"?{name_count + 3}", f"?{name_count + 4}"
    allowed = (
        f"AND (SELECT CASE WHEN {build} IS NULL THEN r.build_id IS NULL "
        f"WHEN r.build_id IS NULL THEN {top} IS NULL OR {top} = {build} "
        f"WHEN r.pin = 'latest' THEN {build} = coalesce({top}, r.build_id) "
        f"ELSE r.build_id = {build} END FROM runs r WHERE r.id = work.run_id) "
        if builds
        else ""
    )
    tail = (
        f"AND name IN ({names}) {allowed}ORDER BY available_at, run_id, id LIMIT ?{name_count + 2}"
    )
    free = f"SELECT {_DUE_COLUMNS} FROM work WHERE owner IS NULL AND available_at <= ?1 {tail}"
    expired = (
        f"SELECT {_DUE_COLUMNS} FROM work WHERE owner IS NOT NULL AND expires_at <= ?1 "
        f"AND available_at <= ?1 {tail}"
    )
    return free, expired


# --------------------------------------------------------------------------- slots

# ``INDEXED BY``: without statistics the planner would walk the primary key, that
# is every row of the pair, waiters included; the partial indexes make the
# holder count read at most ``limit`` rows and the first waiter one row.
SLOT_STATE = (
    "SELECT (SELECT count(*) FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 1) AS holding, "
    "(SELECT run_id FROM slots INDEXED BY slots_waiting "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 0 ORDER BY position LIMIT 1) AS first_waiter, "
    "(SELECT run_id FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 1 LIMIT 1) AS holder, "
    "coalesce((SELECT lim FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 1 LIMIT 1), "
    "(SELECT lim FROM slots INDEXED BY slots_waiting "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 0 ORDER BY position LIMIT 1)) AS lim"
)
# A pair's holders and waiters now, as its sample of minute ?3 (peaks kept).
SAMPLE_SLOTS = (
    "INSERT INTO slot_samples (key, ivalue, minute, holders, waiters, peak_holders, "
    "peak_waiters) SELECT ?1, ?2, ?3, h, w, h, w FROM (SELECT "
    "(SELECT count(*) FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 1) AS h, "
    "(SELECT count(*) FROM slots INDEXED BY slots_waiting "
    "WHERE key = ?1 AND ivalue = ?2 AND holding = 0) AS w) WHERE true "
    "ON CONFLICT (key, ivalue, minute) DO UPDATE SET holders = excluded.holders, "
    "waiters = excluded.waiters, peak_holders = max(peak_holders, excluded.holders), "
    "peak_waiters = max(peak_waiters, excluded.waiters)"
)
# Samples before ?1, oldest first, at most ?2, but a pair's newest unless it is empty.
DROP_SLOT_SAMPLES = (
    "DELETE FROM slot_samples WHERE (key, ivalue, minute) IN ("
    "SELECT key, ivalue, minute FROM slot_samples AS s INDEXED BY slot_samples_minute "
    "WHERE minute < ?1 AND (holders = 0 AND waiters = 0 OR EXISTS (SELECT 1 FROM "
    "slot_samples AS n WHERE n.key = s.key AND n.ivalue = s.ivalue AND n.minute > s.minute)) "
    "ORDER BY minute LIMIT ?2)"
)
# A key's history in [?2, ?3): per pair and bucket of ?4 microseconds the merged
# samples (the last one's levels, the most of the peaks), and each pair's newest
# before ?2 (its values found by seeks of the primary key, not a scan of the key).
SLOT_HISTORY = (
    "WITH RECURSIVE g AS (SELECT ivalue, (minute - ?2) / ?4 AS bucket, max(minute) AS last, "
    "max(peak_holders) AS ph, max(peak_waiters) AS pw FROM slot_samples "
    "INDEXED BY slot_samples_key WHERE key = ?1 AND minute >= ?2 AND minute < ?3 "
    "GROUP BY ivalue, bucket), "
    "v(iv) AS (SELECT min(ivalue) FROM slot_samples WHERE key = ?1 UNION ALL "
    "SELECT (SELECT min(ivalue) FROM slot_samples WHERE key = ?1 AND ivalue > v.iv) "
    "FROM v WHERE v.iv IS NOT NULL) "
    "SELECT g.ivalue AS ivalue, ?2 + g.bucket * ?4 AS minute, e.holders AS holders, "
    "e.waiters AS waiters, g.ph AS peak_holders, g.pw AS peak_waiters FROM g "
    "JOIN slot_samples AS e ON e.key = ?1 AND e.ivalue = g.ivalue AND e.minute = g.last "
    "UNION ALL SELECT s.ivalue, s.minute, s.holders, s.waiters, s.peak_holders, "
    "s.peak_waiters FROM v JOIN slot_samples AS s ON s.key = ?1 AND s.ivalue = v.iv "
    "AND s.minute = (SELECT max(minute) FROM slot_samples "
    "WHERE key = ?1 AND ivalue = v.iv AND minute < ?2) ORDER BY 1, 2"
)
# A row arrives after every row of its pair (the primary key's last position).
INSERT_SLOT = (
    "INSERT INTO slots (key, ivalue, position, run_id, value, lim, holding, hold, priority, "
    "burst) VALUES (?1, ?2, (SELECT coalesce(max(position), 0) + 1 FROM slots "
    "WHERE key = ?1 AND ivalue = ?2), ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
)
DROP_HOLD = "DELETE FROM slots WHERE run_id = ? AND hold = ? RETURNING key, ivalue"
DROP_HOLDS = "DELETE FROM slots WHERE run_id = ? AND hold <> 0 RETURNING key, ivalue"
DROP_RUN_SLOTS = "DELETE FROM slots WHERE run_id = ? RETURNING key, ivalue"
# The first in line: lowest priority number, then first in (the index's order).
FIRST_WAITER = (
    "SELECT run_id, hold FROM slots INDEXED BY slots_queue WHERE key = ? AND ivalue = ? "
    "AND holding = 0 ORDER BY priority, position LIMIT 1"
)
RUN_WAITING = (
    "SELECT key, ivalue, lim, burst FROM slots WHERE run_id = ? AND hold = ? AND holding = 0"
)
COUNT_HOLDING = (
    "SELECT count(*) FROM slots INDEXED BY slots_holding "
    "WHERE key = ? AND ivalue = ? AND holding = 1"
)
PROMOTE_SLOTS = "UPDATE slots SET holding = 1 WHERE run_id = ? AND hold = ? AND holding = 0"
MOVE_RUN_SLOTS = "UPDATE slots SET run_id = ? WHERE run_id = ?"
DROP_LAPSED_TOKENS = "DELETE FROM rate_tokens WHERE key = ? AND ivalue = ? AND at <= ?"
NEWEST_TOKENS = (
    "SELECT at, run_id, lim, per FROM rate_tokens WHERE key = ? AND ivalue = ? "
    "ORDER BY at DESC LIMIT ?"
)
TOKENS_AFTER = (
    "SELECT at, run_id, lim, per FROM rate_tokens WHERE key = ? AND ivalue = ? AND at > ? "
    "ORDER BY at LIMIT ?"
)
RUN_TOKENS = (
    "SELECT key, ivalue, at, lim, per, number FROM rate_tokens INDEXED BY rate_tokens_run "
    "WHERE run_id = ? ORDER BY key, ivalue, number"
)
DROP_TOKEN = "DELETE FROM rate_tokens WHERE key = ? AND ivalue = ? AND run_id = ? AND number = ?"
INSERT_TOKEN = (
    "INSERT OR REPLACE INTO rate_tokens (key, ivalue, at, run_id, number, lim, per, priority) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
RESERVED_TOKENS = (
    "SELECT at, run_id, priority FROM rate_tokens WHERE key = ? AND ivalue = ? AND at > ? "
    "AND number = 0 AND priority > ? ORDER BY at"
)
GET_WORKFLOW_NAME = "SELECT workflow FROM runs WHERE id = ?"
_SLOT_COLUMNS = "key, value, run_id, lim, holding, position, hold, priority, burst"
LIST_SLOTS = (
    f"SELECT {_SLOT_COLUMNS} FROM slots WHERE key = ? AND ivalue = ? "
    "ORDER BY holding DESC, CASE WHEN holding = 1 THEN 0 ELSE priority END, position"
)
RUN_SLOTS = f"SELECT {_SLOT_COLUMNS} FROM slots WHERE run_id = ? ORDER BY key, ivalue, hold"
KEY_SLOTS = (
    f"SELECT {_SLOT_COLUMNS} FROM slots WHERE key = ? ORDER BY ivalue, holding DESC, "
    "CASE WHEN holding = 1 THEN 0 ELSE priority END, position LIMIT ?"
)

# --------------------------------------------------------------------------- key limits

# A limited key's row, with its start-time slots held over all values.
KEY_ROW = (
    "SELECT spec, vtime, (SELECT count(*) FROM slots INDEXED BY slots_key_held "
    "WHERE key = ?1 AND holding = 1 AND hold = 0) AS holding, "
    "(SELECT run_id FROM slots INDEXED BY slots_key_held "
    "WHERE key = ?1 AND holding = 1 AND hold = 0 LIMIT 1) AS holder "
    "FROM key_limits WHERE key = ?1"
)
# Each value of a key with rows in line, one index seek each (a skip scan: the line
# of a value with thousands of waiters is not read to find the next value), with
# its first in line (as FIRST_WAITER), the slots held at its pair and its share:
# one statement, however many values wait.
KEY_WAITING = (
    "WITH RECURSIVE v(iv) AS ("
    "SELECT (SELECT min(ivalue) FROM slots INDEXED BY slots_waiting "
    "WHERE key = ?1 AND holding = 0) "
    "UNION ALL SELECT (SELECT min(ivalue) FROM slots INDEXED BY slots_waiting "
    "WHERE key = ?1 AND holding = 0 AND ivalue > v.iv) FROM v WHERE v.iv IS NOT NULL), "
    "h(iv, pos) AS (SELECT iv, (SELECT position FROM slots INDEXED BY slots_queue "
    "WHERE key = ?1 AND ivalue = v.iv AND holding = 0 ORDER BY priority, position LIMIT 1) "
    "FROM v WHERE iv IS NOT NULL) "
    "SELECT h.iv AS ivalue, w.run_id, w.hold, w.lim, w.burst, w.priority, w.position, "
    "(SELECT count(*) FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = h.iv AND holding = 1) AS holding, "
    "coalesce((SELECT share FROM key_shares WHERE key = ?1 AND ivalue = h.iv), 0) AS share "
    "FROM h JOIN slots w ON w.key = ?1 AND w.ivalue = h.iv AND w.position = h.pos "
    "ORDER BY h.iv"
)
KEY_SHARE = "SELECT share FROM key_shares WHERE key = ? AND ivalue = ?"
# The next values of a key's line after (pass, value): a range of ``key_shares_line``,
# each with its pair's first in line (as FIRST_WAITER; NULL when nobody is) and the
# slots held there: a few index seeks per value read, however many values wait.
KEY_LINE = (
    "SELECT q.ivalue, q.share, w.run_id, w.hold, w.lim, w.burst, w.priority, w.position, "
    "(SELECT count(*) FROM slots INDEXED BY slots_holding "
    "WHERE key = ?1 AND ivalue = q.ivalue AND holding = 1) AS holding "
    "FROM (SELECT ivalue, share FROM key_shares INDEXED BY key_shares_line "
    "WHERE key = ?1 AND queued = 1 AND (share, ivalue) > (?2, ?3) "
    "ORDER BY share, ivalue LIMIT ?4) q "
    "LEFT JOIN slots w ON w.key = ?1 AND w.ivalue = q.ivalue AND w.position = ("
    "SELECT position FROM slots INDEXED BY slots_queue WHERE key = ?1 AND ivalue = q.ivalue "
    "AND holding = 0 ORDER BY priority, position LIMIT 1) "
    "ORDER BY q.share, q.ivalue"
)
KEY_PASS = "SELECT share, queued FROM key_shares WHERE key = ? AND ivalue = ?"
# Whether a value waits in its key's line; no row: the key has no limit.
KEY_QUEUED = (
    "SELECT coalesce((SELECT queued FROM key_shares WHERE key = ?1 AND ivalue = ?2), 0) "
    "AS queued FROM key_limits WHERE key = ?1"
)
PUT_KEY_PASS = (
    "INSERT INTO key_shares (key, ivalue, share, queued) VALUES (?, ?, ?, 1) "
    "ON CONFLICT (key, ivalue) DO UPDATE SET share = excluded.share, queued = 1"
)
LEAVE_KEY_LINE = "UPDATE key_shares SET queued = 0 WHERE key = ? AND ivalue = ?"
PUT_KEY_SHARE = (
    "INSERT INTO key_shares (key, ivalue, share) VALUES (?, ?, ?) "
    "ON CONFLICT (key, ivalue) DO UPDATE SET share = excluded.share"
)
PUT_KEY_VTIME = "UPDATE key_limits SET vtime = ? WHERE key = ?"
PUT_KEY_LIMIT = (
    "INSERT INTO key_limits (key, lim, spec) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, spec = excluded.spec"
)
DROP_KEY_LIMIT = "DELETE FROM key_limits WHERE key = ?"
DROP_KEY_SHARES = "DELETE FROM key_shares WHERE key = ?"

# --------------------------------------------------------------------------- debounce

REWRITE_CREATED = "UPDATE events SET data = ? WHERE run_id = ? AND seq = 1"

# --------------------------------------------------------------------------- schedules

SCHEDULE_COLUMNS = (
    "id, workflow, spec, paused, note, next_fire_at, buffered_at, wake_at, version, "
    "created_at, updated_at"
)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}, leased_until) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (id) DO NOTHING"
)
GET_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?"
LIST_SCHEDULES = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id > ? ORDER BY id LIMIT ?"
PUT_SCHEDULE = (
    "UPDATE schedules SET paused = ?, note = ?, next_fire_at = ?, buffered_at = ?, "
    "wake_at = ?, version = ?, updated_at = ?, leased_until = NULL WHERE id = ?"
)
DELETE_SCHEDULE = "DELETE FROM schedules WHERE id = ?"
LEASE_SCHEDULE = "UPDATE schedules SET leased_until = ? WHERE id = ?"


def due_schedules_sql(names: int) -> tuple[str, str]:
    """The due schedules of ``names`` workflows (``now, *names, now, limit``), and the
    next wake time after now (``now, *names``)."""
    marks = ", ".join("?" * names)
    due = (
        f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE paused = 0 AND wake_at IS NOT NULL "
        f"AND wake_at <= ? AND workflow IN ({marks}) "
        "AND (leased_until IS NULL OR leased_until <= ?) ORDER BY wake_at, id LIMIT ?"
    )
    later = (
        "SELECT MIN(wake_at) FROM schedules WHERE paused = 0 AND wake_at IS NOT NULL "
        f"AND wake_at > ? AND workflow IN ({marks})"
    )
    return due, later


def idle_look_sql(names: int, workflows: int) -> str:
    """An idle poll's one look (``worlds.sqlite.idle``; parameters ``now, *names,
    *workflows``): when the earliest work item of ``names`` becomes leasable (a free
    one's due time, a leased one's expiry), the earliest wake time of a due schedule of
    ``workflows`` that nobody holds, the next wake time after now, and the first schedule
    lease to run out. A kind with no names reads NULL without a scan."""
    work = ", ".join(f"?{2 + n}" for n in range(names)) or "NULL"
    flows = ", ".join(f"?{2 + names + n}" for n in range(workflows)) or "NULL"
    unpaused = f"FROM schedules WHERE paused = 0 AND workflow IN ({flows})"
    return (
        "SELECT (SELECT min(t) FROM (SELECT min(available_at) AS t FROM work "
        f"WHERE owner IS NULL AND name IN ({work}) UNION ALL "
        "SELECT min(max(expires_at, available_at)) FROM work "
        f"WHERE owner IS NOT NULL AND name IN ({work}))), "
        f"(SELECT MIN(wake_at) {unpaused} AND wake_at IS NOT NULL AND wake_at <= ?1 "
        "AND (leased_until IS NULL OR leased_until <= ?1)), "
        f"(SELECT MIN(wake_at) {unpaused} AND wake_at IS NOT NULL AND wake_at > ?1), "
        f"(SELECT MIN(leased_until) {unpaused} AND leased_until > ?1)"
    )


GET_SETTING = "SELECT value FROM settings WHERE key = ?"
PUT_SETTING = "INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
REPLACE_SETTING = (
    "INSERT INTO settings (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
DROP_SETTING = "DELETE FROM settings WHERE key = ?"
