"""SQL text of the PostgreSQL world's operations.

Statements name tables without a schema (connections set ``search_path``).
Statements that append events without knowing the run's last sequence number
store them with seq 0: the ``seq`` and ``at`` columns then give the event's
(see ``codecs.decode_event``).
"""

from __future__ import annotations

from worlds.protocol import RUNS_TOPIC, run_topic, work_topic


def _call(function: str, arity: int) -> str:
    """``SELECT * FROM function($1, ..., $arity)``."""
    return f"SELECT * FROM {function}({', '.join(f'${n}' for n in range(1, arity + 1))})"


COMMIT_RUN = _call("commit_run", 28)
COMMIT_RUNS = _call("commit_runs", 30)
"""A batch of ``commit_run`` calls in one (``fast.batch_params``)."""
START_RUN = _call("start_run", 31)
"""A run without claims or deadline, its workflow item leased or its first task applied."""

CREATE_RUN_CLAIMING = (
    "SELECT create_run($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
)
PAIR_HELD = "WF001"
"""The SQLSTATE ``create_run`` raises when a pair to claim is held (nothing was written)."""

# ---------------------------------------------------------------------------- runs

RUN_COLUMNS = (
    "r.id, r.workflow, r.status, r.created_at, r.started_at, r.closed_at, "
    "r.last_seq, r.attributes, r.result, r.error, r.build_id, r.pin, r.last_at, r.admitted_at"
)
GET_RUN = f"SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = $1"
LOCK_RUN = f"{GET_RUN} FOR UPDATE"
# The open runs whose attribute $1 has index value $2 (a run's children, by $parent).
LOCK_OPEN_CHILDREN = (
    f"SELECT {RUN_COLUMNS} FROM attributes a JOIN runs r ON r.id = a.run_id "
    "WHERE a.key = $1 AND a.ivalue = $2 "
    "AND r.status IN ('pending', 'running', 'cancelling') ORDER BY r.id FOR UPDATE OF r"
)
LOCK_LEASE = (
    "SELECT kind, rewake FROM work "
    "WHERE id = $1 AND run_id = $2 AND owner = $3 AND token = $4 FOR UPDATE"
)

# A new run with its attributes, RunCreated event and workflow item, and the
# notification that work of its workflow is due (its ``work_topic``), in one
# statement (data-modifying CTEs all run, in one snapshot; notifications are
# delivered at commit).
CREATE_RUN = f"""
WITH new_run AS (
    INSERT INTO runs (id, workflow, status, created_at, last_seq, last_at, attributes,
                      admitted_at)
    VALUES ($1, $2, 'pending', $3, 1, $3, $4, $11)
), new_attributes AS (
    INSERT INTO attributes (run_id, key, ivalue)
    SELECT $1, k, v FROM unnest($5::text[], $6::text[]) AS a(k, v)
    ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue
), new_event AS (
    INSERT INTO events (run_id, seq, kind, data, at) VALUES ($1, 1, 'run_created', $7, $3)
), new_work AS (
    INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at, token,
                      ever_leased)
    SELECT $8, $1, 'workflow', $2, 0, 1, '', $10::timestamptz, 0, false
    WHERE $10::timestamptz IS NOT NULL
    ON CONFLICT (id) DO NOTHING
)
SELECT pg_notify($9, '{work_topic("")}' || $2)
WHERE $9 IS NOT NULL AND $10::timestamptz IS NOT NULL
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
# A run's topic (and RUNS_TOPIC) on the runs channel, every other (work, schedules)
# on the work channel: a process that waits only on runs its own world object
# closes listens to no channel that each run's close notifies.
NOTIFY = (
    f"SELECT pg_notify(CASE WHEN starts_with(topic, '{run_topic('')}') "
    f"OR topic = '{RUNS_TOPIC}' THEN $2 ELSE $1 END, topic) FROM unnest($3::text[]) AS t(topic)"
)

# --------------------------------------------------------------------------- claims

# Claims a free pair (a new row, or a released one whose generation goes up);
# no row comes back when another run holds it, and the held row is then locked.
CLAIM_IF_FREE = """
INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt, ttl, release_on)
VALUES ($1, $2, $3, $4, 1, $5, $6, $7, $8)
ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id,
    generation = claims.generation + 1, step = excluded.step, attempt = excluded.attempt,
    ttl = excluded.ttl, release_on = excluded.release_on, lapses_at = NULL,
    pruned_status = NULL
WHERE claims.run_id IS NULL
RETURNING generation
"""
_CLAIM_COLUMNS = (
    "key, run_id, generation, step, attempt, value, ttl, release_on, lapses_at, pruned_status"
)
GET_CLAIM = f"SELECT {_CLAIM_COLUMNS} FROM claims WHERE key = $1 AND ivalue = $2"
LOCK_CLAIM = f"{GET_CLAIM} FOR UPDATE"
PUT_CLAIM = """
INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt, ttl, release_on)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value, run_id = excluded.run_id,
    generation = excluded.generation, step = excluded.step, attempt = excluded.attempt,
    ttl = excluded.ttl, release_on = excluded.release_on, lapses_at = NULL,
    pruned_status = NULL
"""
WINDOWED_CLAIMS = (
    "SELECT key, ivalue, ttl, release_on FROM claims WHERE run_id = $1 "
    "AND (ttl IS NOT NULL OR release_on IS NOT NULL)"
)
RELEASE_CLAIM = (
    "UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL, "
    "pruned_status = NULL WHERE key = $1 AND ivalue = $2"
)
SET_LAPSES_AT = "UPDATE claims SET lapses_at = $3 WHERE key = $1 AND ivalue = $2"
MOVE_RUN_CLAIMS = (
    "UPDATE claims SET run_id = $1, generation = generation + 1 WHERE run_id = $2 AND step IS NULL"
)
RUN_CLAIMS = (
    f"SELECT {_CLAIM_COLUMNS} FROM claims WHERE run_id = $1 "
    "AND (lapses_at IS NULL OR lapses_at > $2) ORDER BY key, ivalue"
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
UPDATE_SEQ = "SELECT seq FROM updates WHERE run_id = $1 AND update_id = $2"
RECORD_UPDATE = (
    "INSERT INTO updates (run_id, update_id, seq) VALUES ($1, $2, $3) "
    "ON CONFLICT DO NOTHING RETURNING seq"
)
_HOOK_COLUMNS = "SELECT token, run_id, hook, attributes, created_at FROM hooks"
LIST_HOOKS = f"{_HOOK_COLUMNS} ORDER BY created_at, run_id, hook"
LIST_RUN_HOOKS = f"{_HOOK_COLUMNS} WHERE run_id = $1 ORDER BY created_at, run_id, hook"

# Pruning, in one transaction: the runs to prune (locked; those another
# transaction holds wait for a later prune), the lapsed claims released, the
# pruned runs' claims released or tombstoned, then every row of the runs.
# A pinned run holds the attribute $pinned (worlds._rules.retention.PIN_KEY).
PRUNABLE_RUNS = """
SELECT id FROM runs WHERE closed_at IS NOT NULL AND closed_at < $1
AND ($3::text IS NULL OR status = $3::text)
AND NOT EXISTS (SELECT 1 FROM attributes
                WHERE attributes.run_id = runs.id AND attributes.key = '$pinned')
ORDER BY closed_at, id LIMIT $2 FOR UPDATE OF runs SKIP LOCKED
"""
DROP_ATTRIBUTE = "DELETE FROM attributes WHERE run_id = $1 AND key = $2"
RELEASE_LAPSED_CLAIMS = """
UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL,
    pruned_status = NULL
WHERE lapses_at IS NOT NULL AND lapses_at <= $1
"""
RELEASE_RUN_CLAIMS = """
UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL,
    pruned_status = NULL
WHERE run_id = ANY($1::text[])
"""
TOMBSTONE_RUN_CLAIMS = """
UPDATE claims SET step = NULL, attempt = NULL, pruned_status = r.status
FROM runs r WHERE claims.run_id = r.id AND r.id = ANY($1::text[])
"""
RELEASE_TOMBSTONES = """
UPDATE claims SET run_id = NULL, step = NULL, attempt = NULL, lapses_at = NULL,
    pruned_status = NULL
WHERE pruned_status IS NOT NULL
"""
DELETE_RUNS = """
WITH gone_events AS (
    DELETE FROM events WHERE run_id = ANY($1::text[])
), gone_attributes AS (
    DELETE FROM attributes WHERE run_id = ANY($1::text[])
), gone_work AS (
    DELETE FROM work WHERE run_id = ANY($1::text[])
), gone_hooks AS (
    DELETE FROM hooks WHERE run_id = ANY($1::text[])
), gone_resumes AS (
    DELETE FROM hook_resumes WHERE run_id = ANY($1::text[])
), gone_updates AS (
    DELETE FROM updates WHERE run_id = ANY($1::text[])
), gone_streams AS (
    DELETE FROM streams WHERE run_id = ANY($1::text[])
)
DELETE FROM runs WHERE id = ANY($1::text[])
"""

# ----------------------------------------------------------------------------- streams

NEXT_STREAM_SEQ = "SELECT coalesce(max(seq) + 1, 0) FROM streams WHERE run_id = $1 AND name = $2"
INSERT_STREAM = """
INSERT INTO streams (run_id, name, seq, data, at)
SELECT $1, $2, $3 + n - 1, d, $5 FROM unnest($4::bytea[]) WITH ORDINALITY AS c(d, n)
"""
CLOSE_STREAM = """
INSERT INTO streams (run_id, name, seq, data, at) VALUES ($1, $2, -1, ''::bytea, $3)
ON CONFLICT DO NOTHING
"""
"""A stream's close is its row at offset -1: below every chunk, so no read of chunks
(offsets from 0) meets it and the next offset stays max(seq) + 1."""
STREAM_CLOSED = "SELECT EXISTS (SELECT 1 FROM streams WHERE run_id = $1 AND name = $2 AND seq = -1)"
READ_STREAM = (
    "SELECT seq, data, at FROM streams WHERE run_id = $1 AND name = $2 AND seq >= $3 "
    "ORDER BY seq LIMIT $4"
)

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
    "SELECT name, number, attempt, payload, available_at, owner, expires_at, ever_leased "
    "FROM work WHERE id = $1 FOR UPDATE"
)
SET_REWAKE = "UPDATE work SET rewake = true WHERE id = $1"
SET_AVAILABLE = "UPDATE work SET available_at = $2 WHERE id = $1"
REWAKE_ON_ACK = (
    "UPDATE work SET owner = NULL, expires_at = NULL, rewake = false, available_at = $2 "
    "WHERE id = $1"
)
DELETE_WORK = "DELETE FROM work WHERE id = $1"
# Who holds an item's lease now (named when a commit lost it).
LEASE_HOLDER = "SELECT owner FROM work WHERE id = $1"
# A cancelling run's steps and timers go; each says whether an attempt was in flight.
DROP_CANCELLED_WORK = """
DELETE FROM work WHERE run_id = $1 AND kind IN ('step', 'timer')
RETURNING kind, number, attempt, (owner IS NOT NULL AND expires_at > $2) AS in_flight
"""
LEASE_ONE = (
    "UPDATE work SET available_at = $2, owner = $3, token = $4, expires_at = $5, attempt = $6, "
    "rewake = false, ever_leased = true WHERE id = $1"
)
# Leases due items in one statement: locks them and their runs (rows another
# transaction holds are skipped, so leasing never waits), takes the leases with
# fresh tokens, and appends StepStarted for each step (seq 0 in the data: the
# columns give seq and at; the data is built here from ``STEP_STARTED_PARTS``).
# The expired leases that may be taken over are found apart (``takeable``,
# materialized, read only when a due item has an owner) and matched by id and
# token, so a lease taken meanwhile is not (its token is new): as one OR of
# subqueries in the due filter, they made the planner join every due item to a
# scan of all runs while the tables had no statistics (a new world, before
# autovacuum analyzes it: 1.3 s a lease over 5,000 due items, against 9 ms).
# An expired lease is taken over only once the server has been accepting
# connections for one lease length (at most 5 s): a restart's downtime, crash
# recovery included, must not count against the holders, who reconnect and
# renew or commit what they finished meanwhile. The oldest client connection
# is the server's readiness: none survives a restart, and none opens before
# recovery ends (the postmaster's start time comes before the recovery).
# ``worlds._rules.liveness.is_dead`` in SQL, of the ``workers`` row ``h``: fenced
# already, or another worker (with a window no longer than ``h``'s) beat steadily
# for a whole window of ``h``'s after ``h``'s last heartbeat. Only stored beats are
# compared, so a frozen or unreachable server, which stops every beat, declares
# nobody dead. An item whose lease ran out is taken only from a holder that never
# registered, stopped, is dead, or forgot it (its own steady beats reach a window
# past the lease's end: the server answered it, and it did not renew); the lease
# that takes a dead holder's item fences it (``fence``) and gives back all its
# other leases (``revoked``). A fenced worker leases nothing. Builds (RFC 0025,
# ``worlds._rules.deployments`` in SQL): ``me`` is the leaser's build, ``newest``
# the build of the most recently registered live worker with one; an item is due
# only if its run may run there (``may_lease``), and a workflow item leased by a
# worker of a build its run did not record (its first task, or a ``latest`` run
# moving) records that build and the workflow's pin in it (``bumped``, which also
# moves ``last_seq`` past the StepStarted appended: one UPDATE of each run).
_DEAD = """(h.fenced OR EXISTS (
    SELECT 1 FROM workers k
    WHERE k.id <> h.id AND k.liveness <= h.liveness
      AND k.last_beat - greatest(h.last_beat, k.steady_since)
          >= h.liveness * interval '1 second'))"""
LEASE = f"""
WITH me AS (
    SELECT (SELECT build_id FROM workers WHERE id = $4) AS build
), newest AS (
    SELECT (SELECT h.build_id FROM workers h
            WHERE h.build_id IS NOT NULL AND NOT h.stopped AND NOT {_DEAD}
            ORDER BY h.started_at DESC, h.id DESC LIMIT 1) AS build
), takeable AS MATERIALIZED (
    SELECT w.id, w.token FROM work w
    WHERE w.name = ANY($1::text[]) AND w.owner IS NOT NULL
      AND w.available_at <= least($2, statement_timestamp())
      AND w.expires_at <= least($2, statement_timestamp())
      AND (SELECT min(backend_start) FROM pg_stat_activity
           WHERE backend_type = 'client backend')
          + least($5::timestamptz - $2::timestamptz, interval '5 seconds')
          <= statement_timestamp()
      AND NOT EXISTS (SELECT 1 FROM workers h
                      WHERE h.id = w.owner AND NOT h.stopped AND NOT {_DEAD}
                        AND h.last_beat - greatest(w.expires_at, h.steady_since)
                            < h.liveness * interval '1 second')
), due AS (
    SELECT w.id, w.owner, r.last_seq, greatest($2, r.last_at) AS at, r.build_id AS run_build
    FROM work w JOIN runs r ON r.id = w.run_id
    WHERE w.name = ANY($1::text[]) AND w.available_at <= least($2, statement_timestamp())
      AND (w.owner IS NULL OR (w.expires_at <= least($2, statement_timestamp())
           AND (w.id, w.token) IN (SELECT id, token FROM takeable)))
      AND NOT EXISTS (SELECT 1 FROM workers f WHERE f.id = $4 AND f.fenced)
      AND CASE WHEN (SELECT build FROM me) IS NULL THEN r.build_id IS NULL
          WHEN r.build_id IS NULL THEN (SELECT build FROM newest) IS NULL
               OR (SELECT build FROM newest) = (SELECT build FROM me)
          WHEN r.pin = 'latest'
          THEN (SELECT build FROM me) = coalesce((SELECT build FROM newest), r.build_id)
          ELSE r.build_id = (SELECT build FROM me) END
    ORDER BY w.available_at, w.run_id, w.id
    LIMIT $3
    FOR UPDATE OF w, r SKIP LOCKED
), fence AS (
    UPDATE workers h SET fenced = true
    WHERE h.id IN (SELECT owner FROM due) AND NOT h.stopped AND NOT h.fenced AND {_DEAD}
    RETURNING h.id
), revoked AS (
    UPDATE work w SET owner = NULL, expires_at = NULL
    WHERE w.owner IN (SELECT id FROM fence) AND w.id NOT IN (SELECT id FROM due)
), leased AS (
    UPDATE work w SET owner = $4, expires_at = $5,
        token = 1 + floor(random() * 4611686018427387903)::bigint,
        attempt = w.attempt + (w.kind = 'step' AND w.ever_leased)::integer,
        rewake = false, ever_leased = true
    FROM due WHERE w.id = due.id
    RETURNING w.id, w.run_id, w.kind, w.name, w.number, w.attempt, w.payload, w.token,
        due.last_seq, due.at, due.run_build
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
    UPDATE runs SET last_seq = coalesce(m.seq, runs.last_seq),
        last_at = coalesce(m.at, runs.last_at),
        build_id = CASE WHEN m.moves THEN me.build ELSE runs.build_id END,
        pin = CASE WHEN m.moves
              THEN coalesce((SELECT d.pin FROM deployments d
                             WHERE d.build_id = me.build AND d.workflow = runs.workflow),
                            'run')
              ELSE runs.pin END
    FROM me, (SELECT t.run_id, s.seq, s.at,
                     t.task AND me.build IS NOT NULL AND t.build IS DISTINCT FROM me.build
                         AS moves
              FROM me, (SELECT l.run_id, bool_or(l.kind = 'workflow') AS task,
                               min(l.run_build) AS build
                        FROM leased l GROUP BY l.run_id) AS t
              LEFT JOIN (SELECT run_id, max(seq) AS seq, max(at) AS at FROM started
                         GROUP BY run_id) AS s ON s.run_id = t.run_id) AS m
    WHERE runs.id = m.run_id AND (m.seq IS NOT NULL OR m.moves)
)
SELECT id, run_id, kind, name, number, attempt, payload, token FROM leased
ORDER BY run_id, id
"""
# Renewing and releasing lock the items first, in the order of their runs' ids
# (like every path that locks runs, then their items): an UPDATE alone locks
# rows in whatever order its plan reads them, and deadlocks with a commit_runs.
_HELD = """held AS (
    SELECT work.id FROM work
    JOIN unnest(${ids}::text[], ${tokens}::bigint[]) AS mine(id, token)
        ON work.id = mine.id AND work.token = mine.token
    WHERE work.owner = ${owner}
    ORDER BY work.run_id, work.id
    FOR UPDATE OF work
)"""
RENEW = f"""
WITH {_HELD.format(ids=2, tokens=3, owner=4)}
UPDATE work SET expires_at = $1 FROM held WHERE work.id = held.id
RETURNING work.id, work.token
"""
RELEASE = f"""
WITH {_HELD.format(ids=1, tokens=2, owner=3)}, released AS (
    UPDATE work SET owner = NULL, expires_at = NULL FROM held WHERE work.id = held.id
)
SELECT pg_notify($4, $5)
"""

# ---------------------------------------------------------------------------- slots

# Serializes every change to the given limited pairs (in the order given: sorted).
LOCK_PAIRS = (
    "SELECT pg_advisory_xact_lock(hashtext(k), hashtext(v)) "
    "FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(k, v, n) ORDER BY n"
)
SLOT_STATE = """
SELECT (SELECT count(*) FROM slots WHERE key = $1 AND ivalue = $2 AND holding) AS holding,
    (SELECT run_id FROM slots WHERE key = $1 AND ivalue = $2 AND NOT holding
     ORDER BY position LIMIT 1) AS first_waiter,
    (SELECT run_id FROM slots WHERE key = $1 AND ivalue = $2 AND holding LIMIT 1) AS holder,
    coalesce(
        (SELECT lim FROM slots WHERE key = $1 AND ivalue = $2 AND holding LIMIT 1),
        (SELECT lim FROM slots WHERE key = $1 AND ivalue = $2 AND NOT holding
         ORDER BY position LIMIT 1)) AS lim
"""
# Pairs' holders and waiters now, as their samples of minute $3 (peaks kept).
SAMPLE_SLOTS = """
INSERT INTO slot_samples AS s (key, ivalue, minute, holders, waiters, peak_holders, peak_waiters)
SELECT p.k, p.v, $3, h.n, w.n, h.n, w.n
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(k, v, o)
CROSS JOIN LATERAL (SELECT count(*)::integer AS n FROM slots
    WHERE key = p.k AND ivalue = p.v AND holding) AS h
CROSS JOIN LATERAL (SELECT count(*)::integer AS n FROM slots
    WHERE key = p.k AND ivalue = p.v AND NOT holding) AS w
ORDER BY p.o
ON CONFLICT (key, ivalue, minute) DO UPDATE SET holders = excluded.holders,
    waiters = excluded.waiters, peak_holders = greatest(s.peak_holders, excluded.holders),
    peak_waiters = greatest(s.peak_waiters, excluded.waiters)
"""
# Samples before $1, oldest first, at most $2, but a pair's newest unless it is empty.
DROP_SLOT_SAMPLES = """
DELETE FROM slot_samples WHERE (key, ivalue, minute) IN (
    SELECT key, ivalue, minute FROM slot_samples AS s WHERE minute < $1
    AND (holders = 0 AND waiters = 0 OR EXISTS (SELECT 1 FROM slot_samples AS n
        WHERE n.key = s.key AND n.ivalue = s.ivalue AND n.minute > s.minute))
    ORDER BY minute LIMIT $2 FOR UPDATE SKIP LOCKED)
"""
# A key's history in [$2, $3): per pair and bucket of $4 seconds the merged samples
# (``date_bin``: no numeric arithmetic per row; the last one's levels by ordered
# aggregates, so no join back to the table; the most of the peaks), and each pair's
# newest before $2 (its values found by seeks of the primary key, not a scan).
SLOT_HISTORY = """
WITH RECURSIVE v(iv) AS (SELECT min(ivalue) FROM slot_samples WHERE key = $1
    UNION ALL SELECT (SELECT min(ivalue) FROM slot_samples WHERE key = $1 AND ivalue > v.iv)
    FROM v WHERE v.iv IS NOT NULL)
SELECT ivalue, bucket AS minute, holders, waiters, peak_holders, peak_waiters
FROM (SELECT ivalue,
        date_bin(make_interval(secs => $4::bigint::float8), minute, $2::timestamptz) AS bucket,
        (array_agg(holders ORDER BY minute DESC))[1] AS holders,
        (array_agg(waiters ORDER BY minute DESC))[1] AS waiters,
        max(peak_holders) AS peak_holders, max(peak_waiters) AS peak_waiters
    FROM slot_samples WHERE key = $1 AND minute >= $2 AND minute < $3 GROUP BY 1, 2) AS g
UNION ALL
SELECT s.ivalue, s.minute, s.holders, s.waiters, s.peak_holders, s.peak_waiters
FROM v CROSS JOIN LATERAL (SELECT * FROM slot_samples WHERE key = $1 AND ivalue = v.iv
    AND minute < $2 ORDER BY minute DESC LIMIT 1) AS s
ORDER BY 1, 2
"""
INSERT_SLOTS = """
INSERT INTO slots (key, ivalue, position, run_id, value, lim, holding, priority, burst)
SELECT k, v, nextval('slot_positions'), $4, d, l, $6, $7, b
FROM unnest($1::text[], $2::text[], $3::bytea[], $5::integer[], $8::integer[])
    WITH ORDINALITY AS s(k, v, d, l, b, n)
ORDER BY n
"""
RUN_SLOT_PAIRS = "SELECT key, ivalue FROM slots WHERE run_id = $1 ORDER BY key, ivalue"
DROP_RUN_SLOTS = "DELETE FROM slots WHERE run_id = $1"
DROP_LAPSED_TOKENS = "DELETE FROM rate_tokens WHERE key = $1 AND ivalue = $2 AND at <= $3"
NEWEST_TOKENS = (
    "SELECT at, run_id, lim, per FROM rate_tokens WHERE key = $1 AND ivalue = $2 "
    "ORDER BY at DESC LIMIT $3"
)
TOKENS_AFTER = (
    "SELECT at, run_id, lim, per FROM rate_tokens WHERE key = $1 AND ivalue = $2 AND at > $3 "
    "ORDER BY at LIMIT $4"
)
RUN_TOKENS = (
    "SELECT key, ivalue, at, lim, per, number FROM rate_tokens WHERE run_id = $1 "
    "ORDER BY key, ivalue, number"
)
DROP_TOKEN = (
    "DELETE FROM rate_tokens WHERE key = $1 AND ivalue = $2 AND run_id = $3 AND number = $4"
)
INSERT_TOKEN = (
    "INSERT INTO rate_tokens (key, ivalue, at, run_id, number, lim, per, priority) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING"
)
RESERVED_TOKENS = (
    "SELECT at, run_id, priority FROM rate_tokens WHERE key = $1 AND ivalue = $2 AND at > $3 "
    "AND number = 0 AND priority > $4 ORDER BY at"
)
# The first in line: lowest priority number, then first in (``slots_queue``'s order).
FIRST_WAITER = (
    "SELECT run_id, hold FROM slots WHERE key = $1 AND ivalue = $2 AND NOT holding "
    "ORDER BY priority, position LIMIT 1"
)
INSERT_HOLD = """
INSERT INTO slots (key, ivalue, position, run_id, value, lim, holding, hold, priority)
VALUES ($1, $2, nextval('slot_positions'), $3, $4, $5, $6, $7, $8)
"""
HOLD_PAIR = "SELECT key, ivalue FROM slots WHERE run_id = $1 AND hold = $2"
RUN_HOLD_PAIRS = "SELECT key, ivalue FROM slots WHERE run_id = $1 AND hold <> 0"
DROP_HOLD = "DELETE FROM slots WHERE run_id = $1 AND hold = $2"
DROP_HOLDS = "DELETE FROM slots WHERE run_id = $1 AND hold <> 0"
PROMOTE_HOLD = "UPDATE slots SET holding = true WHERE run_id = $1 AND hold = $2 AND NOT holding"
# Each pair a run waits in: its limit there, the slots held, the first waiter.
# Read only once all those pairs are locked (the caller checks and re-reads).
RUN_WAITING_VIEWS = """
SELECT s.key, s.ivalue, s.lim, s.burst,
    (SELECT count(*) FROM slots h WHERE h.key = s.key AND h.ivalue = s.ivalue AND h.holding)
        AS holding,
    (SELECT ARRAY[w.run_id, w.hold::text] FROM slots w
     WHERE w.key = s.key AND w.ivalue = s.ivalue AND NOT w.holding
     ORDER BY w.priority, w.position LIMIT 1) AS first_waiter
FROM slots s WHERE s.run_id = $1 AND s.hold = $2 AND NOT s.holding
"""
# The waiter takes its slots and gets its workflow item.
PROMOTE = """
WITH promoted AS (
    UPDATE slots SET holding = true WHERE run_id = $1 AND hold = 0 AND NOT holding
)
INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at, token,
                  ever_leased)
SELECT $2, id, 'workflow', workflow, 0, 1, '', $3, 0, false FROM runs WHERE id = $1
ON CONFLICT (id) DO NOTHING
"""
MOVE_RUN_SLOTS = "UPDATE slots SET run_id = $1 WHERE run_id = $2"
_SLOT_COLUMNS = "key, value, run_id, lim, holding, position, hold, priority, burst"
LIST_SLOTS = (
    f"SELECT {_SLOT_COLUMNS} FROM slots WHERE key = $1 AND ivalue = $2 "
    "ORDER BY holding DESC, CASE WHEN holding THEN 0 ELSE priority END, position"
)
RUN_SLOTS = f"SELECT {_SLOT_COLUMNS} FROM slots WHERE run_id = $1 ORDER BY key, ivalue, hold"
KEY_SLOTS = (
    f'SELECT {_SLOT_COLUMNS} FROM slots WHERE key = $1 ORDER BY ivalue COLLATE "C", holding DESC, '
    "CASE WHEN holding THEN 0 ELSE priority END, position LIMIT $2"
)

# ---------------------------------------------------------------------------- key limits

# A limited key's row, with its start-time slots held over all values.
KEY_ROW = """
SELECT spec, vtime,
    (SELECT count(*) FROM slots WHERE key = $1 AND holding AND hold = 0) AS holding,
    (SELECT run_id FROM slots WHERE key = $1 AND holding AND hold = 0 LIMIT 1) AS holder
FROM key_limits WHERE key = $1
"""
# Each value of a key with rows in line (one index seek per value: a skip scan, so
# a value with thousands of waiters is not read through), its first in line (as
# FIRST_WAITER), the slots held at its pair and its share.
KEY_WAITING = """
WITH RECURSIVE v(iv) AS (
    SELECT (SELECT min(ivalue) FROM slots WHERE key = $1 AND NOT holding)
    UNION ALL
    SELECT (SELECT min(ivalue) FROM slots WHERE key = $1 AND NOT holding AND ivalue > v.iv)
    FROM v WHERE v.iv IS NOT NULL
)
SELECT v.iv AS ivalue, w.run_id, w.hold, w.lim, w.burst, w.priority, w.position,
    (SELECT count(*) FROM slots h WHERE h.key = $1 AND h.ivalue = v.iv AND h.holding)
        AS holding,
    coalesce((SELECT share FROM key_shares s WHERE s.key = $1 AND s.ivalue = v.iv), 0)
        AS share
FROM v CROSS JOIN LATERAL (
    SELECT run_id, hold, lim, burst, priority, position FROM slots
    WHERE key = $1 AND ivalue = v.iv AND NOT holding ORDER BY priority, position LIMIT 1
) w
WHERE v.iv IS NOT NULL ORDER BY v.iv
"""
KEY_SHARE = "SELECT share FROM key_shares WHERE key = $1 AND ivalue = $2"
# The next values of a key's line after (pass, value): a range of ``key_shares_line``,
# each with its pair's first in line (as FIRST_WAITER; NULLs when nobody is) and the
# slots held there: a few index seeks per value read, however many values wait.
KEY_LINE = """
SELECT q.ivalue, q.share, w.run_id, w.hold, w.lim, w.burst, w.priority, w.position,
    (SELECT count(*) FROM slots h WHERE h.key = $1 AND h.ivalue = q.ivalue AND h.holding)
        AS holding
FROM (
    SELECT ivalue, share FROM key_shares
    WHERE key = $1 AND queued AND (share, ivalue COLLATE "C") > ($2::float8, $3::text)
    ORDER BY share, ivalue COLLATE "C" LIMIT $4
) q LEFT JOIN LATERAL (
    SELECT run_id, hold, lim, burst, priority, position FROM slots
    WHERE key = $1 AND ivalue = q.ivalue AND NOT holding ORDER BY priority, position LIMIT 1
) w ON true
ORDER BY q.share, q.ivalue COLLATE "C"
"""
KEY_PASS = "SELECT share, queued FROM key_shares WHERE key = $1 AND ivalue = $2"
# Whether a value waits in its key's line; no row: the key has no limit.
KEY_QUEUED = (
    "SELECT coalesce((SELECT queued FROM key_shares WHERE key = $1 AND ivalue = $2), false) "
    "AS queued FROM key_limits WHERE key = $1"
)
PUT_KEY_PASS = (
    "INSERT INTO key_shares (key, ivalue, share, queued) VALUES ($1, $2, $3, true) "
    "ON CONFLICT (key, ivalue) DO UPDATE SET share = excluded.share, queued = true"
)
LEAVE_KEY_LINE = "UPDATE key_shares SET queued = false WHERE key = $1 AND ivalue = $2"
HAS_KEY_LIMIT = "SELECT 1 FROM key_limits WHERE key = $1"
PUT_KEY_SHARE = """
WITH share AS (
    INSERT INTO key_shares (key, ivalue, share) VALUES ($1, $2, $3)
    ON CONFLICT (key, ivalue) DO UPDATE SET share = excluded.share
)
UPDATE key_limits SET vtime = $4 WHERE key = $1
"""
PUT_KEY_LIMIT = (
    "INSERT INTO key_limits (key, lim, spec) VALUES ($1, $2, $3) "
    "ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, spec = excluded.spec"
)
DROP_KEY_LIMIT = """
WITH shares AS (DELETE FROM key_shares WHERE key = $1)
DELETE FROM key_limits WHERE key = $1
"""

# ---------------------------------------------------------------------------- debounce

REWRITE_CREATED = "UPDATE events SET data = $2 WHERE run_id = $1 AND seq = 1"
SET_ADMITTED = "UPDATE runs SET admitted_at = $2 WHERE id = $1"

# ---------------------------------------------------------------------------- schedules

SCHEDULE_COLUMNS = (
    "id, workflow, spec, paused, note, next_fire_at, buffered_at, wake_at, version, "
    "created_at, updated_at"
)
INSERT_SCHEDULE = (
    f"INSERT INTO schedules ({SCHEDULE_COLUMNS}, leased_until) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL) ON CONFLICT (id) DO NOTHING "
    "RETURNING id"
)
GET_SCHEDULE = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = $1"
LOCK_SCHEDULE = f"{GET_SCHEDULE} FOR UPDATE"
LOCK_SCHEDULES = (
    f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE"
)
EXISTING_RUNS = "SELECT id FROM runs WHERE id = ANY($1::text[])"
LIST_SCHEDULES = f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id > $1 ORDER BY id LIMIT $2"
PUT_SCHEDULE = (
    "UPDATE schedules SET paused = $2, note = $3, next_fire_at = $4, buffered_at = $5, "
    "wake_at = $6, version = $7, updated_at = $8, leased_until = NULL WHERE id = $1"
)
DELETE_SCHEDULE = "DELETE FROM schedules WHERE id = $1"
LEASE_SCHEDULES = (
    "WITH due AS (SELECT id FROM schedules WHERE NOT paused AND wake_at IS NOT NULL "
    "AND wake_at <= $1 AND workflow = ANY($2::text[]) "
    "AND (leased_until IS NULL OR leased_until <= $1) ORDER BY wake_at, id LIMIT $3 "
    "FOR UPDATE SKIP LOCKED) "
    "UPDATE schedules s SET leased_until = $4 FROM due WHERE s.id = due.id "
    f"RETURNING {', '.join('s.' + c.strip() for c in SCHEDULE_COLUMNS.split(','))}"
)
NEXT_WORK = (
    "SELECT least((SELECT min(available_at) FROM work "
    "WHERE owner IS NULL AND name = ANY($1::text[])), "
    "(SELECT min(greatest(expires_at, available_at)) FROM work "
    "WHERE owner IS NOT NULL AND name = ANY($1::text[])))"
)
"""When the earliest item of the names becomes leasable: a free one's due time, or a
leased one's expiry; NULL when there is none (an idle poll's memory, ``worlds._quiet``)."""
SCHEDULE_LEASES_END = (
    "SELECT min(leased_until) FROM schedules WHERE NOT paused AND leased_until > $1 "
    "AND workflow = ANY($2::text[])"
)
"""When the first schedule lease held now runs out (an idle poll's memory, ``worlds._quiet``)."""
NEXT_SCHEDULE_WAKE = (
    "SELECT min(wake_at) FROM schedules WHERE NOT paused AND wake_at IS NOT NULL "
    "AND wake_at > $1 AND workflow = ANY($2::text[])"
)
GET_SETTING = "SELECT value FROM settings WHERE key = $1"
PUT_SETTING = "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING"
REPLACE_SETTING = (
    "INSERT INTO settings (key, value) VALUES ($1, $2) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
DROP_SETTING = "DELETE FROM settings WHERE key = $1"

# ---------------------------------------------------------------------------- workers

WORKERS = "SELECT * FROM workers"
WORKER = "SELECT * FROM workers WHERE id = $1 FOR UPDATE"
PUT_WORKER = """
INSERT INTO workers VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (id) DO UPDATE SET host = $2, pid = $3, build_id = $4, liveness = $5,
    started_at = $6, last_beat = $7, steady_since = $8, in_flight = $9, fenced = $10,
    stopped = $11
"""
DROP_WORKERS = "DELETE FROM workers WHERE last_beat < $1"
# Pinned deployments (RFC 0025).
DEPLOYMENT = "SELECT workflow, pin, registered_at FROM deployments WHERE build_id = $1"
DEPLOYMENTS = "SELECT build_id, workflow, pin, registered_at FROM deployments"
FIRST_DEPLOYED = "SELECT min(registered_at) FROM deployments WHERE build_id = $1"
DROP_DEPLOYMENT = "DELETE FROM deployments WHERE build_id = $1"
PUT_DEPLOYMENT = (
    "INSERT INTO deployments (build_id, workflow, pin, registered_at) "
    "SELECT $1, t.workflow, t.pin, $4 FROM unnest($2::text[], $3::text[]) AS t(workflow, pin)"
)
RUN_BUILDS = "SELECT id, workflow, build_id, pin FROM runs WHERE id = ANY($1::text[])"
SET_RUN_BUILD = "UPDATE runs SET build_id = $2, pin = $3 WHERE id = $1"
OPEN_RUNS_BY_BUILD = (
    "SELECT build_id, pin, count(*)::integer AS runs FROM runs "
    "WHERE build_id IS NOT NULL AND status IN ('pending', 'running') GROUP BY build_id, pin"
)
REVOKE_LEASES = "UPDATE work SET owner = NULL, expires_at = NULL WHERE owner = $1"
# A heartbeat, in one statement whatever the worker holds ($1 the worker, $2 its
# in-flight count, $3/$4 the work channel and topic), stamped with the server's
# clock when it runs (not when it was sent: one held up by a frozen server is
# stamped when the server runs again, so its beat proves nothing earlier): the
# beat of a live worker (``worlds._rules.liveness.beat``: its steady run restarts
# after a gap over half its window), or, for one the rule finds dead, its fencing
# and the revocation of its leases. ``alive`` is False for an unknown, stopped or
# fenced worker.
HEARTBEAT = f"""
WITH me AS (
    SELECT h.id, h.stopped, {_DEAD} AS dead FROM workers h WHERE h.id = $1 FOR UPDATE
), beat AS (
    UPDATE workers w SET last_beat = greatest(w.last_beat, statement_timestamp()),
        steady_since = CASE
            WHEN statement_timestamp() - w.last_beat <= w.liveness * interval '0.5 second'
            THEN w.steady_since ELSE statement_timestamp() END,
        in_flight = $2
    FROM me WHERE w.id = me.id AND NOT me.dead AND NOT me.stopped
    RETURNING w.id
), fence AS (
    UPDATE workers w SET fenced = true
    FROM me WHERE w.id = me.id AND me.dead AND NOT me.stopped AND NOT w.fenced
    RETURNING w.id
), revoked AS (
    UPDATE work SET owner = NULL, expires_at = NULL WHERE owner IN (SELECT id FROM fence)
    RETURNING work.id
)
SELECT EXISTS (SELECT 1 FROM beat) AS alive,
    (SELECT count(*) FROM (SELECT pg_notify($3, $4) FROM fence) AS n) AS fenced
"""
