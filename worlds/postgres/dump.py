"""The PostgreSQL world's side of a full dump and load: its ``DumpSource`` and ``LoadRows``.

The statements are the shared ones of ``worlds._dump_sql`` in PostgreSQL's
dialect (a list of run ids is one ``text[]`` parameter), plus what only this
schema has: each event's ``at`` and the run's ``last_at``, and the sequence
that numbers slot positions, moved past the positions loaded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

import asyncpg

from worlds import archive
from worlds._dump_sql import DumpParams, DumpSql
from worlds.postgres import codecs
from worlds.postgres.rows import PostgresRows
from worlds.protocol import SCHEDULE_TOPIC, WORK_TOPIC
from worlds.types import EventKind, Pin

__all__ = ["PostgresLoad", "PostgresSource"]


def _as_is(moment: datetime) -> datetime:
    return moment


SQL = DumpSql(lambda n: f"${n}", "{column} = ANY($1::text[])")
PARAMS = DumpParams(codecs.columns, _as_is, _as_is)
_EVENTS = (
    "SELECT run_id, seq, at, data FROM events WHERE run_id = ANY($1::text[]) ORDER BY run_id, seq"
)
_INSERT_RUN = (
    "INSERT INTO runs (id, workflow, status, created_at, started_at, closed_at, last_seq, "
    "attributes, result, error, build_id, pin, admitted_at, last_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
)
_INSERT_EVENT = "INSERT INTO events (run_id, seq, kind, data, at) VALUES ($1, $2, $3, $4, $5)"
_MOVE_POSITIONS = (
    "SELECT setval('slot_positions', (SELECT max(position) FROM slots)) "
    "WHERE (SELECT max(position) FROM slots) >= (SELECT last_value FROM slot_positions)"
)


class PostgresSource:
    """Reads the dump of a PostgreSQL world, one connection per page."""

    def __init__(self, pool: Callable[[], Awaitable[asyncpg.Pool]]) -> None:
        self._pool = pool

    async def _fetch(self, statement: str, *args: object) -> list[asyncpg.Record]:
        return list(await (await self._pool()).fetch(statement, *args))

    async def dumped_settings(self) -> list[archive.DumpRow]:
        return [
            archive.DumpedSetting(r["key"], r["value"]) for r in await self._fetch(SQL.settings)
        ]

    async def dumped_run_ids(self, after: str, limit: int) -> list[str]:
        return [r["id"] for r in await self._fetch(SQL.run_ids, after, limit)]

    async def dumped_run_rows(self, run_ids: Sequence[str]) -> list[archive.DumpRow]:
        ids = list(run_ids)
        async with (
            (await self._pool()).acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            logs: dict[str, list[EventKind]] = {}
            for row in await conn.fetch(_EVENTS, ids):
                event = codecs.decode_event(row["data"], row["seq"], row["at"])
                logs.setdefault(row["run_id"], []).append(event)
            out: list[archive.DumpRow] = []
            for row in await conn.fetch(SQL.runs, ids):
                record = codecs.columns.run(row)
                out.append(archive.DumpedRun(record, logs.get(record.id, [])))
            out += [PARAMS.claim_or_release(r) for r in await conn.fetch(SQL.claims, ids)]
            out += [PARAMS.slot(r) for r in await conn.fetch(SQL.slots, ids)]
            out += [PARAMS.token(r) for r in await conn.fetch(SQL.tokens, ids)]
            out += [PARAMS.hook(r) for r in await conn.fetch(SQL.hooks, ids)]
            out += [PARAMS.resume(r) for r in await conn.fetch(SQL.resumes, ids)]
            out += [PARAMS.update(r) for r in await conn.fetch(SQL.updates, ids)]
            out += [PARAMS.work(r) for r in await conn.fetch(SQL.work, ids)]
            out += [PARAMS.chunk(r) for r in await conn.fetch(SQL.chunks, ids)]
        return out

    async def dumped_world_rows(self) -> list[archive.DumpRow]:
        loose = [PARAMS.claim_or_release(r) for r in await self._fetch(SQL.loose_claims)]
        out: list[archive.DumpRow] = [row for row in loose if isinstance(row, archive.DumpedClaim)]
        out += [row for row in loose if isinstance(row, archive.DumpedRelease)]
        out += [PARAMS.schedule(r) for r in await self._fetch(SQL.schedules)]
        out += [PARAMS.key_limit(r) for r in await self._fetch(SQL.key_limits)]
        out += [PARAMS.key_share(r) for r in await self._fetch(SQL.key_shares)]
        out += [PARAMS.deployment(r) for r in await self._fetch(SQL.deployments)]
        return out


class PostgresLoad:
    """Writes dumped rows inside one transaction (``rows``'), each kind in one
    pipelined ``executemany``."""

    def __init__(self, rows: PostgresRows) -> None:
        self._rows = rows
        self._conn = rows.conn

    async def _many(self, statement: str, params: Sequence[tuple[object, ...]]) -> None:
        if params:
            await self._conn.executemany(statement, params)

    async def stored_setting(self, key: str) -> str | None:
        value = await self._conn.fetchval("SELECT value FROM settings WHERE key = $1", key)
        return None if value is None else str(value)

    async def stored_deployment(self, build_id: str) -> dict[str, Pin] | None:
        return await self._rows.deployment(build_id)

    async def load_settings(self, rows: Sequence[archive.DumpedSetting]) -> None:
        await self._many(SQL.insert_setting, [(r.key, r.value) for r in rows])

    async def load_runs(self, rows: Sequence[archive.DumpedRun]) -> None:
        runs = [(*PARAMS.run(r.record), r.events[-1].at if r.events else None) for r in rows]
        await self._many(_INSERT_RUN, runs)
        terms = [t for r in rows for t in PARAMS.attribute_terms(r.record)]
        await self._many(SQL.insert_attribute, terms)
        events = [
            (r.record.id, e.seq, codecs.EVENT_TAGS[type(e)], codecs.encode(e), e.at)
            for r in rows
            for e in r.events
        ]
        await self._many(_INSERT_EVENT, events)

    async def load_claims(
        self, claims: Sequence[archive.DumpedClaim], released: Sequence[archive.DumpedRelease]
    ) -> None:
        params = [PARAMS.claim(c) for c in claims] + [PARAMS.release(r) for r in released]
        await self._many(SQL.insert_claim, params)

    async def load_slots(self, rows: Sequence[archive.DumpedSlot]) -> None:
        await self._many(SQL.insert_slot, [PARAMS.slot_row(r) for r in rows])
        if rows:
            await self._conn.execute(_MOVE_POSITIONS)

    async def load_tokens(self, rows: Sequence[archive.DumpedToken]) -> None:
        await self._many(SQL.insert_token, [PARAMS.token_row(r) for r in rows])

    async def load_hooks(
        self, hooks: Sequence[archive.DumpedHook], resumes: Sequence[archive.DumpedResume]
    ) -> None:
        await self._many(SQL.insert_hook, [PARAMS.hook_row(h) for h in hooks])
        await self._many(SQL.insert_resume, [(r.token, r.resume_id, r.run_id) for r in resumes])

    async def load_updates(self, rows: Sequence[archive.DumpedUpdate]) -> None:
        await self._many(SQL.insert_update, [PARAMS.update_row(u) for u in rows])

    async def load_work(self, rows: Sequence[archive.DumpedWork]) -> None:
        await self._many(SQL.insert_work, [PARAMS.work_row(w) for w in rows])
        if rows:
            self._rows.signals.add(WORK_TOPIC)

    async def load_chunks(self, rows: Sequence[archive.DumpedChunk]) -> None:
        await self._many(SQL.insert_chunk, [PARAMS.chunk_row(c) for c in rows])

    async def load_schedules(self, rows: Sequence[archive.DumpedSchedule]) -> None:
        await self._many(SQL.insert_schedule, [PARAMS.schedule_row(s) for s in rows])
        if rows:
            self._rows.signals.add(SCHEDULE_TOPIC)

    async def load_key_limits(
        self, limits: Sequence[archive.DumpedKeyLimit], shares: Sequence[archive.DumpedKeyShare]
    ) -> None:
        await self._many(SQL.insert_key_limit, [PARAMS.key_limit_row(k) for k in limits])
        await self._many(SQL.insert_key_share, [PARAMS.key_share_row(k) for k in shares])

    async def load_deployments(self, rows: Sequence[archive.DumpedDeployment]) -> None:
        await self._many(SQL.insert_deployment, [PARAMS.deployment_row(d) for d in rows])
