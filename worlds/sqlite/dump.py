"""The SQLite world's side of a full dump and load: its ``DumpSource`` and ``LoadRows``.

The statements are the shared ones of ``worlds._dump_sql`` in SQLite's
dialect (a list of run ids is one JSON array parameter); reads go through the
connection a page at a time, loads run inside the world's write transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from worlds import archive
from worlds._dump_sql import DumpParams, DumpSql
from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC
from worlds.sqlite import codecs
from worlds.sqlite.connection import Connection
from worlds.sqlite.rows import SqliteRows
from worlds.types import EventKind, Pin

__all__ = ["SqliteLoad", "SqliteSource"]

SQL = DumpSql(lambda n: "?", "{column} IN (SELECT value FROM json_each(?))")
PARAMS = DumpParams(codecs.columns, codecs.from_micros, codecs.to_micros)
_EVENTS = (
    "SELECT run_id, data FROM events WHERE run_id IN (SELECT value FROM json_each(?)) "
    "ORDER BY run_id, seq"
)


class SqliteSource:
    """Reads the dump of an SQLite world, one read per page."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    async def dumped_settings(self) -> list[archive.DumpRow]:
        def body(db: sqlite3.Connection) -> list[archive.DumpRow]:
            return [
                archive.DumpedSetting(row["key"], row["value"]) for row in db.execute(SQL.settings)
            ]

        return await self._connection.read(body)

    async def dumped_run_ids(self, after: str, limit: int) -> list[str]:
        def body(db: sqlite3.Connection) -> list[str]:
            return [row["id"] for row in db.execute(SQL.run_ids, (after, limit))]

        return await self._connection.read(body)

    async def dumped_run_rows(self, run_ids: Sequence[str]) -> list[archive.DumpRow]:
        ids = (json.dumps(list(run_ids)),)

        def body(db: sqlite3.Connection) -> list[archive.DumpRow]:
            logs: dict[str, list[EventKind]] = {}
            for row in db.execute(_EVENTS, ids):
                logs.setdefault(row["run_id"], []).append(codecs.decode_event(row["data"]))
            out: list[archive.DumpRow] = []
            for row in db.execute(SQL.runs, ids):
                record = codecs.columns.run(row)
                out.append(archive.DumpedRun(record, logs.get(record.id, [])))
            out += [PARAMS.claim_or_release(row) for row in db.execute(SQL.claims, ids)]
            out += [PARAMS.slot(row) for row in db.execute(SQL.slots, ids)]
            out += [PARAMS.token(row) for row in db.execute(SQL.tokens, ids)]
            out += [PARAMS.hook(row) for row in db.execute(SQL.hooks, ids)]
            out += [PARAMS.resume(row) for row in db.execute(SQL.resumes, ids)]
            out += [PARAMS.update(row) for row in db.execute(SQL.updates, ids)]
            out += [PARAMS.work(row) for row in db.execute(SQL.work, ids)]
            out += [PARAMS.chunk(row) for row in db.execute(SQL.chunks, ids)]
            return out

        return await self._connection.read(body)

    async def dumped_world_rows(self) -> list[archive.DumpRow]:
        def body(db: sqlite3.Connection) -> list[archive.DumpRow]:
            loose = [PARAMS.claim_or_release(row) for row in db.execute(SQL.loose_claims)]
            out: list[archive.DumpRow] = [
                row for row in loose if isinstance(row, archive.DumpedClaim)
            ]
            out += [row for row in loose if isinstance(row, archive.DumpedRelease)]
            out += [PARAMS.schedule(row) for row in db.execute(SQL.schedules)]
            out += [PARAMS.key_limit(row) for row in db.execute(SQL.key_limits)]
            out += [PARAMS.key_share(row) for row in db.execute(SQL.key_shares)]
            out += [PARAMS.deployment(row) for row in db.execute(SQL.deployments)]
            return out

        return await self._connection.read(body)


class SqliteLoad:
    """Writes dumped rows inside one write transaction (``rows``'); never suspends."""

    def __init__(self, rows: SqliteRows) -> None:
        self._rows = rows
        self._db = rows.db

    async def stored_setting(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    async def stored_deployment(self, build_id: str) -> dict[str, Pin] | None:
        return await self._rows.deployment(build_id)

    async def load_settings(self, rows: Sequence[archive.DumpedSetting]) -> None:
        self._db.executemany(SQL.insert_setting, [(r.key, r.value) for r in rows])

    async def load_runs(self, rows: Sequence[archive.DumpedRun]) -> None:
        db = self._db
        db.executemany(SQL.insert_run, [PARAMS.run(r.record) for r in rows])
        db.executemany(
            SQL.insert_attribute, [t for r in rows for t in PARAMS.attribute_terms(r.record)]
        )
        events = [
            (r.record.id, event.seq, codecs.EVENT_TAGS[type(event)], codecs.encode(event))
            for r in rows
            for event in r.events
        ]
        db.executemany("INSERT INTO events (run_id, seq, kind, data) VALUES (?, ?, ?, ?)", events)

    async def load_claims(
        self, claims: Sequence[archive.DumpedClaim], released: Sequence[archive.DumpedRelease]
    ) -> None:
        params = [PARAMS.claim(c) for c in claims] + [PARAMS.release(r) for r in released]
        self._db.executemany(SQL.insert_claim, params)

    async def load_slots(self, rows: Sequence[archive.DumpedSlot]) -> None:
        self._db.executemany(SQL.insert_slot, [PARAMS.slot_row(r) for r in rows])

    async def load_tokens(self, rows: Sequence[archive.DumpedToken]) -> None:
        self._db.executemany(SQL.insert_token, [PARAMS.token_row(r) for r in rows])

    async def load_hooks(
        self, hooks: Sequence[archive.DumpedHook], resumes: Sequence[archive.DumpedResume]
    ) -> None:
        self._db.executemany(SQL.insert_hook, [PARAMS.hook_row(h) for h in hooks])
        self._db.executemany(SQL.insert_resume, [(r.token, r.resume_id, r.run_id) for r in resumes])

    async def load_updates(self, rows: Sequence[archive.DumpedUpdate]) -> None:
        self._db.executemany(SQL.insert_update, [PARAMS.update_row(u) for u in rows])

    async def load_work(self, rows: Sequence[archive.DumpedWork]) -> None:
        self._db.executemany(SQL.insert_work, [PARAMS.work_row(w) for w in rows])
        if rows:
            self._rows.signals.add(WORK_TOPIC)

    async def load_chunks(self, rows: Sequence[archive.DumpedChunk]) -> None:
        self._db.executemany(SQL.insert_chunk, [PARAMS.chunk_row(c) for c in rows])

    async def load_schedules(self, rows: Sequence[archive.DumpedSchedule]) -> None:
        self._db.executemany(SQL.insert_schedule, [PARAMS.schedule_row(s) for s in rows])
        if rows:
            self._rows.signals.add(SCHEDULE_TOPIC)

    async def load_key_limits(
        self, limits: Sequence[archive.DumpedKeyLimit], shares: Sequence[archive.DumpedKeyShare]
    ) -> None:
        self._db.executemany(SQL.insert_key_limit, [PARAMS.key_limit_row(k) for k in limits])
        self._db.executemany(SQL.insert_key_share, [PARAMS.key_share_row(k) for k in shares])

    async def load_deployments(self, rows: Sequence[archive.DumpedDeployment]) -> None:
        self._db.executemany(SQL.insert_deployment, [PARAMS.deployment_row(d) for d in rows])
