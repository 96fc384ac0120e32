"""The SQL of a world's full dump and load, for both SQL worlds.

The SQLite and PostgreSQL schemas name their tables and columns alike
(``worlds._columns``), so the statements that read and write dumped rows
(``worlds.archive``) are written once here, given how a backend marks a
parameter (``?`` or ``$n``), and so are the rows and parameters they read and
take, given how it stores a time. What differs stays with the backend: how a
list of run ids is passed, PostgreSQL's event ``at``/``last_at`` columns and
its slot position sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from worlds._columns import Columns, Row, decode_key_limit, decode_value, encode
from worlds.archive import (
    DumpedChunk,
    DumpedClaim,
    DumpedDeployment,
    DumpedHook,
    DumpedKeyLimit,
    DumpedKeyShare,
    DumpedRelease,
    DumpedResume,
    DumpedSchedule,
    DumpedSlot,
    DumpedToken,
    DumpedUpdate,
    DumpedWork,
)
from worlds.semantics import encode_release_on, index_value
from worlds.types import RunRecord

__all__ = ["CARRIED_TABLES", "NOT_CARRIED_TABLES", "DumpParams", "DumpSql"]

CARRIED_TABLES: dict[str, str] = {
    "settings": "setting",
    "runs": "run",
    "events": "run",
    "attributes": "run",
    "claims": "claim",
    "slots": "slot",
    "rate_tokens": "rate_token",
    "hooks": "hook",
    "hook_resumes": "hook_resume",
    "updates": "update",
    "work": "work",
    "streams": "stream",
    "schedules": "schedule",
    "key_limits": "key_limit",
    "key_shares": "key_share",
    "deployments": "deployment",
}
"""Each table of both SQL worlds that a dump carries, with the tag of the dumped row
(``worlds.archive``) that carries it: ``events`` travel in their run's row and
``attributes`` (the index terms of ``runs.attributes``) are rebuilt from it;
``claims`` rows without a run are ``released`` rows. A migration that adds a
table adds it here or to ``NOT_CARRIED_TABLES`` (a test enumerates the tables)."""

NOT_CARRIED_TABLES: dict[str, str] = {
    "slot_samples": (
        "per-minute samples of limited pairs' slots for the UI's history charts: "
        "observations of the source world's past, pruned by prune_slot_history; the "
        "target samples its own from the moment its workers run"
    ),
    "workers": (
        "registered workers are processes of the source world: they register again on "
        "the target, and a copied liveness row would make a stopped worker look alive "
        "or fence a live id"
    ),
    "schema_migrations": (
        "PostgreSQL's record of the migrations applied: the target's own, written by its "
        "migrations (SQLite keeps it in PRAGMA user_version, not a table)"
    ),
}
"""Each table of a SQL world a dump leaves out, and why."""

_RUN_COLUMNS = (
    "id, workflow, status, created_at, started_at, closed_at, last_seq, attributes, result, "
    "error, build_id, pin, admitted_at"
)
_CLAIM_COLUMNS = (
    "key, ivalue, value, run_id, generation, step, attempt, ttl, release_on, lapses_at, "
    "pruned_status"
)
_SLOT_COLUMNS = "key, ivalue, position, run_id, value, lim, holding, hold, priority, burst"
_TOKEN_COLUMNS = "key, ivalue, at, run_id, number, lim, per, priority"
_HOOK_COLUMNS = "token, run_id, hook, attributes, created_at"
_RESUME_COLUMNS = "token, resume_id, run_id"
_WORK_COLUMNS = (
    "run_id, id, kind, name, number, attempt, payload, available_at, owner, token, "
    "expires_at, rewake, ever_leased"
)
_CHUNK_COLUMNS = "run_id, name, seq, data, at"
_UPDATE_COLUMNS = "run_id, update_id, seq"
_KEY_LIMIT_COLUMNS = "key, lim, spec, vtime"
_KEY_SHARE_COLUMNS = "key, ivalue, share, queued"
_DEPLOYMENT_COLUMNS = "build_id, workflow, pin, registered_at"
_SCHEDULE_COLUMNS = (
    "id, workflow, spec, paused, note, next_fire_at, buffered_at, wake_at, version, "
    "created_at, updated_at, leased_until"
)


def _insert(table: str, columns: str, mark: Callable[[int], str]) -> str:
    marks = ", ".join(mark(i) for i in range(1, len(columns.split(",")) + 1))
    return f"INSERT INTO {table} ({columns}) VALUES ({marks})"


class DumpSql:
    """The dump's statements in one backend's dialect.

    Args:
        mark: the ``n``-th parameter's marker (``?`` or ``$n``).
        run_ids: the SQL condition that a column is among the run ids of the
            statement's first parameter, ``{column}`` standing for the column.
    """

    def __init__(self, mark: Callable[[int], str], run_ids: str) -> None:
        def among(column: str) -> str:
            return run_ids.format(column=column)

        self.settings = "SELECT key, value FROM settings ORDER BY key"
        self.run_ids = f"SELECT id FROM runs WHERE id > {mark(1)} ORDER BY id LIMIT {mark(2)}"
        self.runs = f"SELECT {_RUN_COLUMNS} FROM runs WHERE {among('id')} ORDER BY id"
        self.claims = (
            f"SELECT {_CLAIM_COLUMNS} FROM claims WHERE {among('run_id')} "
            "AND pruned_status IS NULL ORDER BY key, ivalue"
        )
        self.slots = (
            f"SELECT {_SLOT_COLUMNS} FROM slots WHERE {among('run_id')} "
            "ORDER BY key, ivalue, position"
        )
        self.tokens = (
            f"SELECT {_TOKEN_COLUMNS} FROM rate_tokens WHERE {among('run_id')} "
            "ORDER BY key, ivalue, at, run_id, number"
        )
        self.hooks = f"SELECT {_HOOK_COLUMNS} FROM hooks WHERE {among('run_id')} ORDER BY token"
        self.resumes = (
            f"SELECT {_RESUME_COLUMNS} FROM hook_resumes WHERE {among('run_id')} "
            "ORDER BY token, resume_id"
        )
        self.work = f"SELECT {_WORK_COLUMNS} FROM work WHERE {among('run_id')} ORDER BY run_id, id"
        self.chunks = (
            f"SELECT {_CHUNK_COLUMNS} FROM streams WHERE {among('run_id')} "
            "ORDER BY run_id, name, seq"
        )
        self.updates = (
            f"SELECT {_UPDATE_COLUMNS} FROM updates WHERE {among('run_id')} "
            "ORDER BY run_id, update_id"
        )
        self.key_limits = f"SELECT {_KEY_LIMIT_COLUMNS} FROM key_limits ORDER BY key"
        self.key_shares = f"SELECT {_KEY_SHARE_COLUMNS} FROM key_shares ORDER BY key, ivalue"
        self.deployments = (
            f"SELECT {_DEPLOYMENT_COLUMNS} FROM deployments ORDER BY build_id, workflow"
        )
        self.loose_claims = (
            f"SELECT {_CLAIM_COLUMNS} FROM claims "
            "WHERE run_id IS NULL OR pruned_status IS NOT NULL ORDER BY key, ivalue"
        )
        self.schedules = f"SELECT {_SCHEDULE_COLUMNS} FROM schedules ORDER BY id"
        self.insert_setting = _insert("settings", "key, value", mark)
        self.insert_run = _insert("runs", _RUN_COLUMNS, mark)
        self.insert_claim = _insert("claims", _CLAIM_COLUMNS, mark)
        self.insert_slot = _insert("slots", _SLOT_COLUMNS, mark)
        self.insert_token = _insert("rate_tokens", _TOKEN_COLUMNS, mark)
        self.insert_hook = _insert("hooks", _HOOK_COLUMNS, mark)
        self.insert_resume = _insert("hook_resumes", _RESUME_COLUMNS, mark)
        self.insert_work = _insert("work", _WORK_COLUMNS, mark)
        self.insert_chunk = _insert("streams", _CHUNK_COLUMNS, mark)
        self.insert_schedule = _insert("schedules", _SCHEDULE_COLUMNS, mark)
        self.insert_attribute = _insert("attributes", "run_id, key, ivalue", mark)
        self.insert_update = _insert("updates", _UPDATE_COLUMNS, mark)
        self.insert_key_limit = _insert("key_limits", _KEY_LIMIT_COLUMNS, mark)
        self.insert_key_share = _insert("key_shares", _KEY_SHARE_COLUMNS, mark)
        self.insert_deployment = _insert("deployments", _DEPLOYMENT_COLUMNS, mark)


class DumpParams:
    """Rows read from, and parameters written to, the dump's tables, given a backend's
    ``time`` (how it stores a time) and its ``Columns``."""

    def __init__(
        self,
        columns: Columns,
        read_time: Callable[[Any], datetime],
        store_time: Callable[[datetime], Any],
    ) -> None:
        self.columns = columns
        self._read = read_time
        self._store = store_time

    def _maybe(self, moment: datetime | None) -> Any:
        return None if moment is None else self._store(moment)

    # ------------------------------------------------------------ reading

    def claim_or_release(self, row: Row) -> DumpedClaim | DumpedRelease:
        """A claims row: held or a tombstone, or (no ``run_id``) a released pair."""
        if row["run_id"] is None:
            value = decode_value(row["value"])
            return DumpedRelease(row["key"], row["ivalue"], row["generation"], value)
        return DumpedClaim(self.columns.claim(row))

    def slot(self, row: Row) -> DumpedSlot:
        """A slots row."""
        return DumpedSlot(self.columns.slot(row))

    def token(self, row: Row) -> DumpedToken:
        """A rate_tokens row."""
        at = self._read(row["at"])
        return DumpedToken(
            row["key"],
            row["ivalue"],
            at,
            row["run_id"],
            row["number"],
            row["lim"],
            row["per"],
            row["priority"],
        )

    def hook(self, row: Row) -> DumpedHook:
        """A hooks row."""
        return DumpedHook(self.columns.hook(row))

    def resume(self, row: Row) -> DumpedResume:
        """A hook_resumes row."""
        return DumpedResume(row["token"], row["resume_id"], row["run_id"])

    def work(self, row: Row) -> DumpedWork:
        """A work row, its lease left out."""
        return DumpedWork(
            run_id=row["run_id"],
            id=row["id"],
            kind=cast(Any, row["kind"]),
            name=row["name"],
            number=row["number"],
            attempt=row["attempt"],
            payload=bytes(row["payload"]),
            available_at=self._read(row["available_at"]),
            rewake=bool(row["rewake"]),
            ever_leased=bool(row["ever_leased"]),
        )

    def chunk(self, row: Row) -> DumpedChunk:
        """A streams row."""
        return DumpedChunk(
            row["run_id"], row["name"], row["seq"], bytes(row["data"]), self._read(row["at"])
        )

    def schedule(self, row: Row) -> DumpedSchedule:
        """A schedules row, its lease left out."""
        return DumpedSchedule(self.columns.schedule(row))

    def update(self, row: Row) -> DumpedUpdate:
        """An updates row."""
        return DumpedUpdate(row["run_id"], row["update_id"], row["seq"])

    def key_limit(self, row: Row) -> DumpedKeyLimit:
        """A key_limits row (``spec``: the stored ``KeyLimit``, its weights)."""
        return DumpedKeyLimit(decode_key_limit(bytes(row["spec"])), float(row["vtime"]))

    def key_share(self, row: Row) -> DumpedKeyShare:
        """A key_shares row."""
        return DumpedKeyShare(row["key"], row["ivalue"], float(row["share"]), bool(row["queued"]))

    def deployment(self, row: Row) -> DumpedDeployment:
        """A deployments row."""
        pin = cast(Any, row["pin"])
        return DumpedDeployment(
            row["build_id"], row["workflow"], pin, self._read(row["registered_at"])
        )

    # ------------------------------------------------------------ writing

    def run(self, run: RunRecord) -> tuple[object, ...]:
        """``insert_run``'s parameters."""
        error = None if run.error is None else encode(run.error)
        times = (
            self._store(run.created_at),
            self._maybe(run.started_at),
            self._maybe(run.closed_at),
        )
        return (
            run.id,
            run.workflow,
            run.status.value,
            *times,
            run.last_seq,
            encode(run.attributes),
            run.result,
            error,
            run.build_id,
            run.pin,
            self._maybe(run.admitted_at),
        )

    def attribute_terms(self, run: RunRecord) -> list[tuple[object, ...]]:
        """``insert_attribute``'s parameters for each of the run's attributes."""
        return [(run.id, key, index_value(value)) for key, value in run.attributes.items()]

    def claim(self, row: DumpedClaim) -> tuple[object, ...]:
        """``insert_claim``'s parameters of a held claim or tombstone."""
        c = row.claim
        pruned = None if c.pruned_status is None else c.pruned_status.value
        return (
            c.key,
            index_value(c.value),
            encode(c.value),
            c.run_id,
            c.generation,
            c.step,
            c.attempt,
            c.ttl,
            encode_release_on(c.release_on),
            self._maybe(c.lapses_at),
            pruned,
        )

    def release(self, row: DumpedRelease) -> tuple[object, ...]:
        """``insert_claim``'s parameters of a released pair."""
        return (
            row.key,
            row.ivalue,
            encode(row.value),
            None,
            row.generation,
            None,
            None,
            None,
            encode_release_on(frozenset()),
            None,
            None,
        )

    def slot_row(self, row: DumpedSlot) -> tuple[object, ...]:
        """``insert_slot``'s parameters."""
        s = row.slot
        return (
            s.key,
            index_value(s.value),
            s.position,
            s.run_id,
            encode(s.value),
            s.limit,
            s.holding,
            s.hold,
            s.priority,
            s.burst,
        )

    def token_row(self, t: DumpedToken) -> tuple[object, ...]:
        """``insert_token``'s parameters."""
        return (t.key, t.ivalue, self._store(t.at), t.run_id, t.number, t.limit, t.per, t.priority)

    def hook_row(self, row: DumpedHook) -> tuple[object, ...]:
        """``insert_hook``'s parameters."""
        h = row.hook
        return (h.token, h.run_id, h.hook, encode(h.attributes), self._store(h.created_at))

    def work_row(self, w: DumpedWork) -> tuple[object, ...]:
        """``insert_work``'s parameters: no owner, token 0, no expiry (due once available)."""
        return (
            w.run_id,
            w.id,
            w.kind,
            w.name,
            w.number,
            w.attempt,
            w.payload,
            self._store(w.available_at),
            None,
            0,
            None,
            w.rewake,
            w.ever_leased,
        )

    def chunk_row(self, c: DumpedChunk) -> tuple[object, ...]:
        """``insert_chunk``'s parameters."""
        return (c.run_id, c.name, c.seq, c.data, self._store(c.at))

    def update_row(self, u: DumpedUpdate) -> tuple[object, ...]:
        """``insert_update``'s parameters."""
        return (u.run_id, u.update_id, u.seq)

    def key_limit_row(self, k: DumpedKeyLimit) -> tuple[object, ...]:
        """``insert_key_limit``'s parameters (the limit stored as ``put_key_limit`` does)."""
        return (k.limit.key, k.limit.limit, encode(k.limit), k.vtime)

    def key_share_row(self, k: DumpedKeyShare) -> tuple[object, ...]:
        """``insert_key_share``'s parameters."""
        return (k.key, k.ivalue, k.share, k.queued)

    def deployment_row(self, d: DumpedDeployment) -> tuple[object, ...]:
        """``insert_deployment``'s parameters."""
        return (d.build_id, d.workflow, d.pin, self._store(d.registered_at))

    def schedule_row(self, row: DumpedSchedule) -> tuple[object, ...]:
        """``insert_schedule``'s parameters, unleased."""
        r = row.schedule
        return (
            r.id,
            r.workflow,
            r.spec,
            r.paused,
            r.note,
            self._maybe(r.next_fire_at),
            self._maybe(r.buffered_at),
            self._maybe(r.wake_at),
            r.version,
            self._store(r.created_at),
            self._store(r.updated_at),
            None,
        )
