"""Migration 1 of the PostgreSQL world's schema: the initial tables.

What: ``runs`` (one row per run), ``events`` (a run's log, keyed by run and
sequence number), ``attributes`` (the index terms of run attributes,
``worlds.semantics.index_value``), ``claims`` (unique (key, value) pairs and
their generations) and ``work`` (the queue of workflow tasks, steps and
timers, with their leases), with the indexes the lease scans and searches use.

Why: every write goes through the run row's lock, so there are no foreign
keys; pruning deletes a run's rows together.
"""

from __future__ import annotations

__all__ = ["STATEMENTS"]

STATEMENTS: tuple[str, ...] = (
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
)
