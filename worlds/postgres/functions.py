"""The live text of the PostgreSQL world's PL/pgSQL functions, for reading.

The one-round-trip functions (``fast.py`` calls them) are the one place where
an algorithm of the flows (``worlds._flows``: commit, create) is written a
second time, for speed; ``tests/worlds/test_postgres_fast_path.py`` holds them
equal to the flows. Databases get them only through the frozen migrations
(``worlds.postgres.migrations``); each text here is the statement of the latest
migration that defines the function, and
``tests/worlds/test_postgres_migrations.py`` checks that it is. To change a
function: a new migration with ``CREATE OR REPLACE`` (or ``DROP`` and
``CREATE`` for a new signature), then its text here.
"""

from __future__ import annotations

__all__ = ["COMMIT_RUN", "COMMIT_RUNS", "CREATE_RUN", "LIVE", "START_RUN"]

COMMIT_RUN = """
CREATE OR REPLACE FUNCTION commit_run(
    p_run text, p_worker text, p_lease text, p_token bigint, p_ack boolean,
    p_now timestamptz, p_kinds text[], p_data bytea[], p_status text,
    p_started timestamptz, p_closed timestamptz, p_result bytea, p_error bytea,
    p_ids text[], p_wkinds text[], p_names text[], p_numbers integer[],
    p_attempts integer[], p_payloads bytea[], p_available timestamptz[],
    p_lease_asked boolean[], p_tokens bigint[], p_expires timestamptz,
    p_starts bytea[], p_channel text, p_run_channel text, p_expect integer,
    p_at timestamptz
) RETURNS TABLE (
    outcome text, status text, last_seq integer, at timestamptz, name text, notify boolean
)
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
    v_seen boolean;
    v_step_only boolean;
BEGIN
    SELECT runs.status, runs.last_seq, runs.last_at, runs.workflow, runs.admitted_at INTO r
    FROM runs
    WHERE runs.id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'missing', NULL::text, 0, NULL::timestamptz, NULL::text, false;
        RETURN;
    END IF;
    IF r.status IN ('completed', 'failed', 'cancelled', 'continued') THEN
        RETURN QUERY SELECT 'closed', r.status, r.last_seq, NULL::timestamptz, NULL::text, false;
        RETURN;
    END IF;
    IF p_lease IS NOT NULL THEN
        SELECT work.kind, work.rewake INTO h FROM work
        WHERE work.id = p_lease AND work.run_id = p_run AND work.owner = p_worker
          AND work.token = p_token
        FOR UPDATE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'lost', r.status, r.last_seq, NULL::timestamptz, NULL::text, false;
            RETURN;
        END IF;
    END IF;
    -- a rate-limited run's RunStarted is dated at its admission (runs.admitted_at),
    -- which the commit flow's rule does: the general path's
    IF p_started IS NOT NULL AND r.admitted_at IS NOT NULL THEN
        RETURN QUERY SELECT 'general', r.status, r.last_seq, NULL::timestamptz, NULL::text, false;
        RETURN;
    END IF;
    -- closing a run is the general path's when the run has slots (waiters to
    -- promote), claims with a reuse window (to release or date), a parent (to
    -- tell) or children (to cancel with it)
    IF p_closed IS NOT NULL AND (
        EXISTS (SELECT 1 FROM slots WHERE slots.run_id = p_run)
        OR EXISTS (SELECT 1 FROM claims WHERE claims.run_id = p_run
                   AND (claims.ttl IS NOT NULL OR claims.release_on IS NOT NULL))
        OR EXISTS (SELECT 1 FROM attributes WHERE attributes.run_id = p_run
                   AND attributes.key = '$parent')
        OR EXISTS (SELECT 1 FROM attributes WHERE attributes.key = '$parent'
                   AND attributes.ivalue = 's:' || p_run)
    ) THEN
        RETURN QUERY SELECT 'general', r.status, r.last_seq, NULL::timestamptz, NULL::text, false;
        RETURN;
    END IF;
    IF p_expect IS NOT NULL THEN
        -- seen: an event after the horizon the workflow would have seen, or one
        -- later than p_at; step_only: every later event is a step's own record
        -- except attribute events, whose step only the caller can read
        SELECT coalesce(bool_or((p_at IS NOT NULL AND events.at > p_at)
                OR (events.seq > p_expect AND events.kind NOT IN ('step_started',
                    'step_retrying', 'step_discarded', 'attribute_set',
                    'attribute_conflict'))), false),
            coalesce(bool_and(events.seq <= p_expect
                OR events.kind IN ('step_started', 'step_retrying', 'step_discarded')), true)
        INTO v_seen, v_step_only
        FROM events WHERE events.run_id = p_run AND events.seq >= p_expect;
        IF v_seen THEN
            RETURN QUERY SELECT 'stale', r.status, r.last_seq, NULL::timestamptz, NULL::text,
                false;
            RETURN;
        ELSIF NOT v_step_only THEN
            RETURN QUERY SELECT 'recheck', r.status, r.last_seq, NULL::timestamptz,
                NULL::text, false;
            RETURN;
        END IF;
    END IF;
    -- times never go back along a run's log, whichever host wrote last; a
    -- conditional commit's events carry the time its workflow was shown
    v_now := coalesce(p_at, greatest(least(p_now, statement_timestamp()), r.last_at));
    v_seq := r.last_seq;
    INSERT INTO events (run_id, seq, kind, data, at)
    SELECT p_run, v_seq + n, k, d, v_now FROM unnest(p_kinds, p_data) WITH ORDINALITY AS e(k, d, n);
    v_seq := v_seq + coalesce(cardinality(p_kinds), 0);
    IF p_closed IS NOT NULL THEN
        DELETE FROM work WHERE work.run_id = p_run;
        DELETE FROM hooks WHERE hooks.run_id = p_run;
        IF p_run_channel IS NOT NULL THEN
            PERFORM pg_notify(p_run_channel, 'run:' || p_run);
        END IF;
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
                    RETURN QUERY
                        SELECT 'leased', NULL::text, i, NULL::timestamptz, p_names[i], false;
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
                RETURN QUERY SELECT 'leased', NULL::text, i, NULL::timestamptz, r.workflow, false;
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
    IF v_notify AND p_channel IS NOT NULL THEN
        PERFORM pg_notify(p_channel, 'work');
    END IF;
    RETURN QUERY SELECT 'ok', coalesce(p_status, r.status), r.last_seq, v_now, r.workflow,
        v_notify AND p_channel IS NULL;
END
$fn$
"""
"""A commit with no claims, hooks, run attributes or continue-as-new, in one round trip:
the run locked, the lease checked, the events appended, the item acked, the work enqueued,
as the commit flow does; outcome ``general`` hands the rest back to the flow (and so
does a rate-limited run's ``RunStarted``, dated at its admission by the flow).
Defined by migration 20."""

COMMIT_RUNS = """
CREATE FUNCTION commit_runs(
    p_runs text[], p_workers text[], p_leases text[], p_tokens bigint[], p_acks boolean[],
    p_nows timestamptz[], p_event_counts integer[], p_kinds text[], p_data bytea[],
    p_statuses text[], p_starteds timestamptz[], p_closeds timestamptz[], p_results bytea[],
    p_errors bytea[], p_item_counts integer[], p_ids text[], p_wkinds text[], p_names text[],
    p_numbers integer[], p_attempts integer[], p_payloads bytea[],
    p_available timestamptz[], p_lease_asked boolean[], p_item_tokens bigint[],
    p_expires timestamptz[], p_starts bytea[], p_channel text, p_run_channel text,
    p_expects integer[], p_ats timestamptz[]
) RETURNS TABLE (
    req integer, outcome text, status text, last_seq integer, at timestamptz, name text,
    notify boolean
)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    e integer := 0;
    w integer := 0;
    ne integer;
    nw integer;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_runs), 0) LOOP
        ne := p_event_counts[i];
        nw := p_item_counts[i];
        RETURN QUERY SELECT i, c.* FROM commit_run(p_runs[i], p_workers[i], p_leases[i],
            p_tokens[i], p_acks[i], p_nows[i], p_kinds[e + 1 : e + ne],
            p_data[e + 1 : e + ne], p_statuses[i], p_starteds[i], p_closeds[i],
            p_results[i], p_errors[i], p_ids[w + 1 : w + nw], p_wkinds[w + 1 : w + nw],
            p_names[w + 1 : w + nw], p_numbers[w + 1 : w + nw], p_attempts[w + 1 : w + nw],
            p_payloads[w + 1 : w + nw], p_available[w + 1 : w + nw],
            p_lease_asked[w + 1 : w + nw], p_item_tokens[w + 1 : w + nw], p_expires[i],
            p_starts[w + 1 : w + nw], p_channel, p_run_channel, p_expects[i], p_ats[i]) AS c;
        e := e + ne;
        w := w + nw;
    END LOOP;
END
$fn$
"""
"""A batch of ``commit_run`` calls in one (``commit_many``); its rows are ``commit_run``'s,
each with the 1-based index ``req`` of its request.
Defined by migration 9."""

START_RUN = """
CREATE FUNCTION start_run(
    p_run text, p_workflow text, p_now timestamptz, p_attributes bytea, p_keys text[],
    p_ivalues text[], p_event bytea, p_item text, p_lease_to text, p_token bigint,
    p_first boolean, p_kinds text[], p_data bytea[], p_status text, p_started timestamptz,
    p_closed timestamptz, p_result bytea, p_error bytea, p_ids text[], p_wkinds text[],
    p_names text[], p_numbers integer[], p_attempts integer[], p_payloads bytea[],
    p_available timestamptz[], p_lease_asked boolean[], p_tokens bigint[],
    p_expires timestamptz, p_starts bytea[], p_channel text, p_run_channel text
) RETURNS TABLE (
    outcome text, status text, last_seq integer, at timestamptz, name text, notify boolean
)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    INSERT INTO runs (id, workflow, status, created_at, last_seq, last_at, attributes)
    VALUES (p_run, p_workflow, 'pending', p_now, 1, p_now, p_attributes);
    INSERT INTO attributes (run_id, key, ivalue)
    SELECT p_run, k, v FROM unnest(p_keys, p_ivalues) AS a(k, v)
    ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue;
    INSERT INTO events (run_id, seq, kind, data, at)
    VALUES (p_run, 1, 'run_created', p_event, p_now);
    IF p_first THEN
        RETURN QUERY SELECT * FROM commit_run(p_run, p_lease_to, NULL, NULL, false, p_now,
            p_kinds, p_data, p_status, p_started, p_closed, p_result, p_error, p_ids,
            p_wkinds, p_names, p_numbers, p_attempts, p_payloads, p_available,
            p_lease_asked, p_tokens, p_expires, p_starts, p_channel, p_run_channel, NULL,
            p_now);
        RETURN;
    END IF;
    INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at, owner,
        token, expires_at, ever_leased)
    VALUES (p_item, p_run, 'workflow', p_workflow, 0, 1, '', p_now, p_lease_to, p_token,
        p_expires, true);
    RETURN QUERY SELECT 'leased', NULL::text, 1, NULL::timestamptz, p_workflow, false;
    RETURN QUERY SELECT 'ok', 'pending', 1, p_now, p_workflow, false;
END
$fn$
"""
"""A run without claims or deadline with its workflow item leased to ``p_lease_to``, or
with its first workflow task applied by ``commit_run`` (``p_first``).
Defined by migration 9."""

CREATE_RUN = """
CREATE OR REPLACE FUNCTION create_run(
    p_run text, p_workflow text, p_now timestamptz, p_attributes bytea, p_keys text[],
    p_ivalues text[], p_event bytea, p_item text, p_channel text, p_claim_keys text[],
    p_claim_ivalues text[], p_claim_values bytea[], p_timer_id text, p_timer_number integer,
    p_timer_attempt integer, p_timer_payload bytea, p_timer_at timestamptz
) RETURNS void
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_claim_keys), 0) LOOP
        INSERT INTO claims (key, ivalue, value, run_id, generation, step, attempt)
        VALUES (p_claim_keys[i], p_claim_ivalues[i], p_claim_values[i], p_run, 1, NULL, NULL)
        ON CONFLICT (key, ivalue) DO UPDATE SET value = excluded.value,
            run_id = excluded.run_id, generation = claims.generation + 1, step = NULL,
            attempt = NULL, ttl = NULL, release_on = NULL, lapses_at = NULL,
            pruned_status = NULL
        WHERE claims.run_id IS NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'pair held' USING ERRCODE = 'WF001';
        END IF;
    END LOOP;
    INSERT INTO runs (id, workflow, status, created_at, last_seq, last_at, attributes)
    VALUES (p_run, p_workflow, 'pending', p_now, 1, p_now, p_attributes);
    INSERT INTO attributes (run_id, key, ivalue)
    SELECT p_run, k, v FROM unnest(p_keys, p_ivalues) AS a(k, v)
    ON CONFLICT (run_id, key) DO UPDATE SET ivalue = excluded.ivalue;
    INSERT INTO events (run_id, seq, kind, data, at)
    VALUES (p_run, 1, 'run_created', p_event, p_now);
    INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at, token,
        ever_leased)
    VALUES (p_item, p_run, 'workflow', p_workflow, 0, 1, '', p_now, 0, false)
    ON CONFLICT (id) DO NOTHING;
    IF p_timer_id IS NOT NULL THEN
        INSERT INTO work (id, run_id, kind, name, number, attempt, payload, available_at,
            owner, token, expires_at, ever_leased)
        VALUES (p_timer_id, p_run, 'timer', p_workflow, p_timer_number, p_timer_attempt,
            p_timer_payload, p_timer_at, NULL, 0, NULL, false)
        ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, name = excluded.name,
            number = excluded.number, attempt = excluded.attempt, payload = excluded.payload,
            available_at = excluded.available_at, owner = excluded.owner,
            token = excluded.token, expires_at = excluded.expires_at, rewake = false,
            ever_leased = excluded.ever_leased;
    END IF;
    IF p_channel IS NOT NULL THEN
        PERFORM pg_notify(p_channel, 'work');
    END IF;
END
$fn$

"""
"""A run with unique pairs to claim or a deadline timer, in one round trip (``fast`` path of
``create_run``): every pair claimed in the order given, or SQLSTATE ``WF001`` on the first
one held, which undoes the call (the create flow then decides by the start policy).
Defined by migration 6."""

LIVE = {
    "commit_run": COMMIT_RUN,
    "commit_runs": COMMIT_RUNS,
    "start_run": START_RUN,
    "create_run": CREATE_RUN,
}
"""Each function's name and its live text."""
