"""Migration 5 of the PostgreSQL world's schema: the one-call ``create_run`` and
``commit_run`` with deferred notifications.

What: ``create_run`` creates a run with unique pairs to claim or a deadline
timer in one round trip: it claims every pair (in the order given) or, on the
first one held, raises SQLSTATE ``WF001``, which undoes the whole call; the
caller then takes the create flow, which decides by the start policy.
``commit_run`` is replaced: its rows gain a ``notify`` column; given NULL
channels it notifies nothing, and its last row's ``notify`` says whether work
became due, for the caller to notify after the commit (``notices.py``).

Why: ``start(idempotency_key=...)`` and ``start(timeout=...)`` become one round
trip when every pair is free; notifications sent inside a transaction
serialise concurrent commits on the notification queue's lock.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    # A run that claims unique pairs or has a deadline, created in one call
    # when every pair is free; a held pair raises WF001 (nothing written)
    # and the caller takes the general path (start policies, conflicts).
    """
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
            attempt = NULL
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
""",
    # commit_run notifies only when given the channels; without them the
    # caller notifies after the commit, and the last row's ``notify`` says
    # whether work became due.
    """DROP FUNCTION commit_run(text, text, text, bigint, boolean, timestamptz, text[],
    bytea[], text, timestamptz, timestamptz, bytea, bytea, text[], text[], text[], integer[],
    integer[], bytea[], timestamptz[], boolean[], bigint[], timestamptz, bytea[], text, text)""",
    """
CREATE FUNCTION commit_run(
    p_run text, p_worker text, p_lease text, p_token bigint, p_ack boolean,
    p_now timestamptz, p_kinds text[], p_data bytea[], p_status text,
    p_started timestamptz, p_closed timestamptz, p_result bytea, p_error bytea,
    p_ids text[], p_wkinds text[], p_names text[], p_numbers integer[],
    p_attempts integer[], p_payloads bytea[], p_available timestamptz[],
    p_lease_asked boolean[], p_tokens bigint[], p_expires timestamptz,
    p_starts bytea[], p_channel text, p_run_channel text
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
BEGIN
    SELECT runs.status, runs.last_seq, runs.last_at, runs.workflow INTO r FROM runs
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
    -- times never go back along a run's log, whichever host wrote last
    v_now := greatest(least(p_now, statement_timestamp()), r.last_at);
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
""",
)
