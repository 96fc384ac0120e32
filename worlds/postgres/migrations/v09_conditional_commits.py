"""Migration 9 of the PostgreSQL world's schema (issue 18): conditional commits,
batches and starts in one round trip.

What: ``commit_run`` gains ``p_expect`` and ``p_at``, the condition of a
conditional commit (``CommitRequest.expect_seq`` and ``at``): an event from
``p_expect`` on later than ``p_at``, or one after ``p_expect`` that is not a
step attempt's own record, makes the outcome ``stale`` (nothing written); an
attribute event after it (whose step is inside its data) makes it ``recheck``,
and the caller decides on the general path; otherwise the events are stamped
``p_at``. ``commit_runs`` applies a batch of commits (the arguments of
``commit_run`` flattened: per-request arrays, and the events and items of all
requests concatenated with their counts) in one call; its rows are
``commit_run``'s, each with the 1-based index ``req`` of its request.
``start_run`` creates a run without claims or deadline together with either
its workflow item leased to ``p_lease_to`` (rows: ``leased`` then ``ok``) or,
with ``p_first``, its first workflow task applied by ``commit_run`` without a
lease, stamped ``p_now`` (``commit_run``'s rows). ``commit_run`` answers
``general`` (nothing written) for a commit that closes a run with slots,
windowed claims, a parent or children: the commit flow releases, promotes,
tells the parent and cancels the children (migration 6's ``slots``, widened).

Why: one transaction per step and group commit (RFC 0018) in one round trip
each. The live text of these functions: ``worlds.postgres.functions``.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
    # commit_run learns conditional commits (p_expect, p_at), which answer
    # 'stale' or 'recheck'; commit_runs applies a batch of commits in one call;
    # start_run creates a run with its workflow item leased or its first task.
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
    """
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
""",
    """
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
""",
)
"""``commit_run`` with conditions, ``commit_runs`` and ``start_run``."""
