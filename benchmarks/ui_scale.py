"""Server time of every chart of the web UI at scale: 1,000,000 runs on SQLite, 200,000
on PostgreSQL, filled by bulk SQL.

``benchmarks/ui_charts.py`` fills its world through ``start`` (131,000 runs took
most of an hour under load); this one makes a few real runs through a
``Worker`` and clones the runs' rows in one ``INSERT ... SELECT`` per table, so
a million runs take minutes:

- runs: ``N`` rows, created evenly over the last 7 days (so "last hour" holds
  about ``N/168`` of them and "last day" ``N/7``), every 50th cancelled, every
  97th failed, the newest 1,000 running, the rest completed two seconds after
  they started; their ``attributes`` index rows: a ``tenant`` (100 values), a
  ``customer`` (5,000 values) and, on every 20th run, ``$schedule`` (one of 50
  schedules). The cloned rows carry the template run's blobs (its attribute
  map and result) and no events: no chart reads either.
- slot history: 100 values of the key ``pool``, each sampled in every minute of
  the last two days (288,000 samples: the most a default retention keeps,
  every value changing every minute), and 200 real limited runs holding and
  waiting at ten of its values now.
- 50 schedules (through ``create_schedule``) and a real run of 400 steps (its
  page draws the waterfall from its log).

Then times, in-process through the ASGI app (``benchmarks/ui_list.py``
``request``), each through a fresh app so no count is reused: the runs
charts (``/fragments/chart``: started and closed per minute by status) over
the last hour and day, by status and by attribute; the flow view with its
history (``/flow?key=pool``, hour and day); the schedules page; the run page
with its waterfall; and the layout of a 3,000-step waterfall (a pure function).
With each, the query plans of the world's statements, so "indexed" is checked,
not assumed.

Usage::

    python -m benchmarks.ui_scale [--runs 1000000] [--db /tmp/ui-scale.db] [--out FILE]
    python -m benchmarks.ui_scale --postgres [--runs 200000] [--out FILE]
"""

from __future__ import annotations

import asyncio
import os
import platform
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import asyncpg

import worlds
from benchmarks.ui_charts import _cached, _fresh, _waterfall
from benchmarks.ui_list import cli
from workflow import Limited, Worker, list_runs, start, step, workflow
from workflow.schedules import create_schedule

SPREAD = timedelta(days=7)
"""The runs' creation times span this, ending now."""
VALUES = 100
"""Values of ``pool`` with a slot history."""
HISTORY = timedelta(days=2)
"""Minutes of slot history per value: the default retention."""
SCHEDULES = 50


@workflow
async def scale_order(n: int) -> int:
    return n


@step
async def scale_part(n: int) -> int:
    return n


@workflow
async def scale_fanout(parts: int) -> int:
    total = 0
    for n in range(parts):
        total += await scale_part(n)
    return total


def _sqlite_fill(path: str, runs: int, template: str) -> None:
    """Clone ``template``'s row into ``runs`` runs, their attribute rows and the slot
    history, in one transaction per table."""
    now = int(datetime.now(UTC).timestamp() * 1_000_000)
    spread = int(SPREAD.total_seconds() * 1_000_000)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    series = "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < ?) "
    status = (
        "CASE WHEN n >= ?2 - 1000 THEN 'running' WHEN n % 50 = 0 THEN 'cancelled' "
        "WHEN n % 97 = 0 THEN 'failed' ELSE 'completed' END"
    )
    created = "(?3 - ?4 + n * (?4 / ?2))"
    db.execute("BEGIN")
    db.execute(
        series.replace("?", "?1")
        + "INSERT INTO runs (id, workflow, status, created_at, started_at, closed_at, last_seq, "
        f"attributes, result, error) SELECT printf('bulk-%08d', n), t.workflow, {status}, "
        f"{created}, {created}, CASE WHEN n >= ?2 - 1000 THEN NULL ELSE {created} + 2000000 END, "
        "t.last_seq, t.attributes, t.result, t.error FROM s, runs AS t WHERE t.id = ?5",
        (runs - 1, runs, now, spread, template),
    )
    db.execute("COMMIT")
    db.execute("BEGIN")
    db.execute(
        series.replace("?", "?1") + "INSERT INTO attributes (run_id, key, ivalue) "
        "SELECT printf('bulk-%08d', n), 'tenant', 's:t-' || (n % 100) FROM s "
        "UNION ALL SELECT printf('bulk-%08d', n), 'customer', 's:c-' || (n % 5000) FROM s "
        "UNION ALL SELECT printf('bulk-%08d', n), '$schedule', 's:sched-' || (n / 20 % ?2) "
        "FROM s WHERE n % 20 = 0",
        (runs - 1, SCHEDULES),
    )
    db.execute("COMMIT")
    minutes = int(HISTORY.total_seconds() // 60)
    first = (now // 60_000_000 - minutes) * 60_000_000
    db.execute("BEGIN")
    db.execute(
        "WITH RECURSIVE v(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM v WHERE n < ?1), "
        "m(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM m WHERE n < ?2) "
        "INSERT INTO slot_samples (key, ivalue, minute, holders, waiters, peak_holders, "
        "peak_waiters) SELECT 'pool', 's:q-' || v.n, ?3 + m.n * 60000000, (v.n + m.n) % 6, "
        "(v.n * m.n) % 9, (v.n + m.n) % 6 + 1, (v.n * m.n) % 9 + 2 FROM v, m",
        (VALUES - 1, minutes - 1, first),
    )
    db.execute("COMMIT")
    db.execute("ANALYZE")
    db.close()


async def _postgres_fill(url: str, runs: int, template: str) -> None:
    """As ``_sqlite_fill``, in PostgreSQL (``generate_series``)."""
    conn = await asyncpg.connect(url)
    try:
        status = (
            "CASE WHEN n >= $1 - 1000 THEN 'running' WHEN n % 50 = 0 THEN 'cancelled' "
            "WHEN n % 97 = 0 THEN 'failed' ELSE 'completed' END"
        )
        created = "(now() - $2::interval + n * ($2::interval / $1))"
        await conn.execute(
            "INSERT INTO runs (id, workflow, status, created_at, started_at, closed_at, "
            f"last_seq, attributes, result, error) SELECT 'bulk-' || lpad(n::text, 8, '0'), "
            f"t.workflow, {status}, {created}, {created}, CASE WHEN n >= $1 - 1000 THEN NULL "
            f"ELSE {created} + interval '2 seconds' END, t.last_seq, t.attributes, t.result, "
            "t.error FROM generate_series(0, $1 - 1) AS n, runs AS t WHERE t.id = $3",
            runs,
            SPREAD,
            template,
        )
        await conn.execute(
            "INSERT INTO attributes (run_id, key, ivalue) "
            "SELECT 'bulk-' || lpad(n::text, 8, '0'), 'tenant', 's:t-' || (n % 100) "
            "FROM generate_series(0, $1 - 1) AS n "
            "UNION ALL SELECT 'bulk-' || lpad(n::text, 8, '0'), 'customer', 's:c-' || (n % 5000) "
            "FROM generate_series(0, $1 - 1) AS n "
            "UNION ALL SELECT 'bulk-' || lpad(n::text, 8, '0'), '$schedule', "
            "'s:sched-' || (n / 20 % $2) FROM generate_series(0, $1 - 1) AS n WHERE n % 20 = 0",
            runs,
            SCHEDULES,
        )
        minutes = int(HISTORY.total_seconds() // 60)
        await conn.execute(
            "INSERT INTO slot_samples (key, ivalue, minute, holders, waiters, peak_holders, "
            "peak_waiters) SELECT 'pool', 's:q-' || v, date_trunc('minute', now()) "
            "- (m + 1) * interval '1 minute', (v + m) % 6, (v * m) % 9, (v + m) % 6 + 1, "
            "(v * m) % 9 + 2 FROM generate_series(0, $1 - 1) AS v, "
            "generate_series(0, $2 - 1) AS m",
            VALUES,
            minutes,
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def _seed(world: worlds.World) -> tuple[str, str]:
    """The real runs: a template, 200 limited ones, a 400-step run, the schedules.
    Returns the template's id and the long run's."""
    async with Worker(world, [scale_order, scale_fanout]):
        template = await start(scale_order, 1, attributes={"tenant": "t-1"}, world=world)
        await template.result(timeout=120)
        long = await start(scale_fanout, 400, world=world)
        await long.result(timeout=600)
    for i in range(200):  # ten values, five slots each: 50 hold, 150 wait
        await start(scale_order, i, attributes={"pool": Limited(f"p-{i % 10}", 5)}, world=world)
    for n in range(SCHEDULES):
        await create_schedule(
            scale_order, n, id=f"sched-{n}", every=timedelta(hours=1), world=world
        )
    return template.id, long.id


def _sqlite_plans(path: str) -> dict[str, list[str]]:
    """The plans SQLite chooses for the charts' statements (``EXPLAIN QUERY PLAN``)."""
    from workflow.query import parse
    from worlds.query import RunQuery
    from worlds.sqlite import statements as sql
    from worlds.sqlite.filters import count_runs_sql

    db = sqlite3.connect(path)
    until = datetime.now(UTC)
    since = until - timedelta(hours=1)
    plans: dict[str, list[str]] = {}
    for name, query in {
        "count_created": RunQuery(),
        "count_created_tenant": RunQuery(where=parse("tenant = 't-50'")),
    }.items():
        statement, params = count_runs_sql(query, "created", since, until, 60)
        plans[name] = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + statement, params)]
    micros = int(since.timestamp() * 1e6)
    plans["slot_history"] = [
        row[3]
        for row in db.execute(
            "EXPLAIN QUERY PLAN " + sql.SLOT_HISTORY,
            ("pool", micros, micros + 3_600_000_000, 60_000_000),
        )
    ]
    db.close()
    return plans


async def _postgres_plans(url: str) -> dict[str, list[str]]:
    from workflow.query import parse
    from worlds.postgres import filters
    from worlds.postgres import statements as sql
    from worlds.query import RunQuery

    conn = await asyncpg.connect(url)
    until = datetime.now(UTC)
    since = until - timedelta(hours=1)
    plans: dict[str, list[str]] = {}
    try:
        for name, query in {
            "count_created": RunQuery(),
            "count_created_tenant": RunQuery(where=parse("tenant = 't-50'")),
        }.items():
            statement, params = filters.count_runs_sql(query, "created", since, until, 60)
            rows = await conn.fetch("EXPLAIN " + statement, *params)
            plans[name] = [row[0] for row in rows]
        rows = await conn.fetch("EXPLAIN " + sql.SLOT_HISTORY, "pool", since, until, 60)
        plans["slot_history"] = [row[0] for row in rows]
    finally:
        await conn.close()
    return plans


async def measure(url: str, runs: int, samples: int) -> dict[str, Any]:
    world = worlds.open(url)
    postgres = url.startswith("postgres")
    async with world:
        fill_seconds = None
        if not (await list_runs(limit=1, world=world)).runs:
            began = time.perf_counter()
            template, long = await _seed(world)
            seeded = time.perf_counter() - began
            began = time.perf_counter()
            if postgres:
                await _postgres_fill(url, runs, template)
            else:
                await asyncio.to_thread(
                    _sqlite_fill, url.removeprefix("sqlite:///"), runs, template
                )
            fill_seconds = {
                "real_runs": round(seeded, 1),
                "bulk_sql": round(time.perf_counter() - began, 1),
            }
        else:
            long = next(
                r.id for r in (await list_runs(workflow="scale_fanout", limit=1, world=world)).runs
            )
        facts = await world.info()
        total = sum(int(v) for k, v in facts.items() if str(k).startswith("runs."))
        charts = {
            "runs_chart_hour": "/fragments/chart?window=hour",
            "runs_chart_day": "/fragments/chart?window=day",
            "runs_chart_day_cancelled": "/fragments/chart?window=day&status=cancelled",
            "runs_chart_day_tenant": "/fragments/chart?"
            + urlencode({"q": "tenant = 't-50'", "window": "day"}),
            "flow_history_hour": "/flow?key=pool",
            "flow_history_day": "/flow?key=pool&window=day",
            "schedules_page": "/schedules",
            "run_page_waterfall_400_steps": f"/runs/{long}",
        }
        warm = "/fragments/chart?workflow=warm-up"
        results: dict[str, Any] = {}
        for name, path in charts.items():
            results[name] = await _fresh(world, path, warm, samples)
        results["runs_chart_hour_cached"] = await _cached(world, charts["runs_chart_hour"], samples)
        results["waterfall_3000_steps_layout"] = _waterfall(samples)
        plans = (
            await _postgres_plans(url)
            if postgres
            else _sqlite_plans(url.removeprefix("sqlite:///"))
        )
    return {
        "runs": total,
        "fill_seconds": fill_seconds,
        "samples": samples,
        "spread_days": SPREAD.days,
        "slot_samples": VALUES * int(HISTORY.total_seconds() // 60),
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_before": os.getloadavg()[0],
        "pages": results,
        "plans": plans,
    }


def main() -> None:
    cli(__doc__, measure, samples=10)


if __name__ == "__main__":
    main()
