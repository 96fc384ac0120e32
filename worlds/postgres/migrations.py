"""The frozen migrations of the PostgreSQL world's schema.

``MIGRATIONS[v]`` holds the statements that take a schema from version
``v - 1`` to version ``v``; version 1 is the initial schema. The text is
literal and frozen: it is what every database at version ``v`` ran, so it is
never edited. A change to the schema (a table, an index, the ``commit_run``
function) is a new migration, with ``CREATE OR REPLACE`` for functions.

``commit_run`` (migration 3, replaced whole by migrations 4, 5 and 6) is a commit with no
claims, hooks, run attributes or continue-as-new, in one round trip. Each
statement of a plpgsql function sees what committed before it started (READ
COMMITTED), so once the run row is locked the function reads and writes
exactly as the multi-statement transaction of the general path. Events are
stored with seq 0: their seq and at are the columns. Its rows: one
``('leased', NULL, i, NULL, name)`` for each scheduled item ``i`` (1-based)
leased to the committer, then ``(outcome, status, last_seq before, at,
workflow)``, where outcome is ok, missing, closed or lost.

Migration 4: the function's time is never later than the server's clock
(``statement_timestamp()``), and an item scheduled without a due time (NULL in
``p_available``) is due at it.

Migration 5: ``create_run``, a run with unique pairs to claim or a deadline
timer, in one round trip: it claims every pair (in the order given) or, on the
first one held, raises SQLSTATE ``WF001``, which undoes the whole call; the
caller then takes the general path, which decides by the start policy.
``commit_run`` is replaced (its rows gain a ``notify`` column): given NULL
channels it notifies nothing, and its last row's ``notify`` says whether work
became due, for the caller to notify after the commit (``notices.py``).

Migration 6: flow control. Tables and columns for limited pairs' slots, reuse
windows and tombstones; ``commit_run`` answers outcome ``slots`` for a commit
that closes a run holding or waiting for slots or holding a claim with a reuse
window (the general path releases, dates and promotes); ``create_run`` clears
the window of an earlier holder from a released pair it claims.

Migration 7: schedules (rfcs/0009-schedules.md), with a timer-like index on
their wake time.

Migration 8: run streams (rfcs/0012-composition.md).

Migration 9 (issue 18, its text in ``migration9.py``): ``commit_run`` gains
``p_expect`` and ``p_at``, the condition of a conditional commit
(``CommitRequest.expect_seq`` and ``at``): an event from ``p_expect`` on later
than ``p_at``, or one after ``p_expect`` that is not a step attempt's own
record, makes the outcome ``stale`` (nothing written);
an attribute event after it (whose step is inside its data) makes it
``recheck``, and the caller decides on the general path; otherwise the events
are stamped ``p_at``. ``commit_runs`` applies a batch of commits (the
arguments of ``commit_run`` flattened: per-request arrays, and the events and
items of all requests concatenated with their counts) in one call; its rows
are ``commit_run``'s, each with the 1-based index ``req`` of its request.
``start_run`` creates a run without claims or deadline together with either
its workflow item leased to ``p_lease_to`` (rows: ``leased`` then ``ok``) or,
with ``p_first``, its first workflow task applied by ``commit_run`` without a
lease, stamped ``p_now`` (``commit_run``'s rows). ``commit_run`` answers
``general`` (nothing written) for a commit that closes a run with slots,
windowed claims, a parent or children: the general path releases, promotes,
tells the parent and cancels the children (migration 6's ``slots``, widened).

Migration 10: slots taken by ``hold()`` inside workflows (rfcs/0008-flow-control.md):
a slot row's hold number (0: a start-time slot of ``Limited``).
"""

from __future__ import annotations

from worlds.postgres import migration5, migration6, migration9

__all__ = ["MIGRATIONS"]

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
        """
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
                INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
                owner, token, expires_at, ever_leased)
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
            INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
                owner, token, expires_at, ever_leased)
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
""",
    ),
    # One clock: ``commit_run`` never takes a time later than the server's, so a
    # committer whose clock runs fast neither leases a timer early nor counts a
    # live lease as expired.
    4: (
        """
CREATE OR REPLACE FUNCTION commit_run(
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
    v_now := greatest(least(p_now, statement_timestamp()), r.last_at);
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
            p_available[i] := coalesce(p_available[i], v_now);
            v_lease := p_lease_asked[i] AND p_available[i] <= v_now;
            IF p_wkinds[i] <> 'workflow' THEN
                INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
                owner, token, expires_at, ever_leased)
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
            INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
                owner, token, expires_at, ever_leased)
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
""",
    ),
    5: migration5.STATEMENTS,
    # Concurrency slots of limited pairs: holders and waiters in arrival order
    # (``position`` from one sequence, taken under the pair's advisory lock);
    # claims get reuse windows (ttl, release_on, lapses_at) and tombstones
    # (pruned_status); ``commit_run`` answers 'slots' for a commit that closes a
    # run with slots or windowed claims: the general path releases and promotes;
    # ``create_run`` gives a pair it claims no window of an earlier holder.
    6: migration6.STATEMENTS,
    # 7: schedules (rfcs/0009-schedules.md).
    7: (
        """CREATE TABLE schedules (
            id text PRIMARY KEY,
            workflow text NOT NULL,
            spec bytea NOT NULL,
            paused boolean NOT NULL,
            note text,
            next_fire_at timestamptz,
            buffered_at timestamptz,
            wake_at timestamptz,
            version bigint NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            leased_until timestamptz
        )""",
        # Workers look only at unpaused schedules that are due: a timer index.
        "CREATE INDEX schedules_wake ON schedules (wake_at) "
        "WHERE NOT paused AND wake_at IS NOT NULL",
    ),
    # 8: run streams (rfcs/0012-composition.md).
    8: (
        """CREATE TABLE streams (
        run_id text NOT NULL,
        name text NOT NULL,
        seq integer NOT NULL,
        data bytea NOT NULL,
        at timestamptz NOT NULL,
        PRIMARY KEY (run_id, name, seq)
    )""",
    ),
    9: migration9.STATEMENTS,
    # 10: slots taken by ``hold`` inside workflows (rfcs/0008-flow-control.md):
    # a row's hold number (0: a start-time slot of ``Limited``).
    10: ("ALTER TABLE slots ADD COLUMN hold integer NOT NULL DEFAULT 0",),
}
"""The statements of each schema version, applied in order to reach it."""
