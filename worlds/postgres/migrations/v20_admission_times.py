"""Migration 20 of the PostgreSQL world's schema: a rate-limited run's admission time.

What: ``runs.admitted_at`` (nullable): for a run started with a ``RateLimited``
value, the time its tokens let it start, written when the run is created and
when its tokens move (priority, ``start_now``, ``set_delay``); NULL for every
other run. ``commit_run`` is replaced: it reads the column with the run and
answers ``general`` (nothing written) for a commit carrying ``RunStarted``
(``p_started``) of a run that has one, so the commit flow dates that event and
``started_at`` at the admission; every other commit is as before.

Why: rfcs/0008-flow-control.md (section 6, "What a token counts"): a run's
recorded start is its admission, so the windows of recorded start times keep
the rate however late a worker begins the run (under load a late worker began
89 runs of a 20-per-window pair in one window). The token rows cannot say it:
they lapse one window after their time, while a run may wait longer for a
worker; the run row is read by every commit anyway. The live text of the
function: ``worlds.postgres.functions``.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE runs ADD COLUMN admitted_at timestamptz",
    """
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
""",
)
