"""Server time of the web UI's charts over a large world (SQLite, or PostgreSQL).

1. Fills a world with N runs through ``start``, as ``benchmarks/ui_list.py``
   does (a ``tenant`` of 100 values, a ``customer``, a unique ``order``; every
   50th run cancelled), or reuses the file given with ``--db``. The runs are
   made in the minutes before the measurement, so "last hour" and "last day"
   hold every one of them: the worst case for a chart, which reads the runs of
   its window.
2. Times, in-process through the ASGI app as a server would call it:
   ``/fragments/chart`` (both charts: started and closed per minute) for the
   last hour and day, unfiltered, by status and by an attribute query, each
   through a fresh app (so no cached count is reused); the same fragment
   again through one app (the cached answer live tabs get); ``World.count_runs``
   alone (the query); the flow-control view over a key with 1,000 limited
   runs; and the layout of a 3,000-step run's waterfall (a pure function, no I/O).

Prints one JSON object (median and p95 in ms); ``--out`` writes it too.

Usage::

    python -m benchmarks.ui_charts [--runs 1000000] [--db /tmp/ui-bench.db] [--out FILE]
    python -m benchmarks.ui_charts --postgres [--runs 200000] [--out FILE]
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import anyio

import worlds
from benchmarks.ui_list import App, cli, filled, order_flow, request
from workflow import Limited, list_runs, start
from workflow.query import parse
from workflow.ui import create_app
from workflow.ui._waterfall import draw, layout
from worlds.query import RunQuery
from worlds.types import EventKind, RunCreated, StepCompleted, StepStarted


def _summary(latencies: list[float], cpu: list[float] | None = None) -> dict[str, float]:
    """Median and p95 wall time; with ``cpu``, the median CPU time of this process too
    (on a loaded machine wall time is mostly waiting for a core; for SQLite, which runs
    in this process, CPU time is the work the request did)."""
    latencies.sort()
    summary = {
        "median_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[max(0, int(0.95 * len(latencies)) - 1)], 2),
    }
    if cpu:
        summary["median_cpu_ms"] = round(statistics.median(cpu), 2)
    return summary


async def _fresh(world: worlds.World, path: str, warm: str, samples: int) -> dict[str, Any]:
    """``path`` through a new app each time, so no count is cached (the first tab's
    cost); ``warm`` (another filter) is asked first so the templates are compiled."""
    latencies, cpu = [], []
    for _ in range(samples):
        app: App = create_app(world, live_seconds=0)
        await request(app, warm)
        began, used = time.perf_counter(), time.process_time()
        status, size = await request(app, path)
        latencies.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - used) * 1000)
        assert status == 200, (path, status)
    return {"path": path, "bytes": size, **_summary(latencies, cpu)}


async def _cached(world: worlds.World, path: str, samples: int) -> dict[str, Any]:
    """``path`` through one app: the counts are reused (what polling tabs cost)."""
    app: App = create_app(world, live_seconds=0)
    await request(app, path)
    latencies = []
    for _ in range(samples):
        began = time.perf_counter()
        await request(app, path)
        latencies.append((time.perf_counter() - began) * 1000)
    return {"path": path, **_summary(latencies)}


async def _query(world: worlds.World, query: RunQuery, samples: int) -> dict[str, Any]:
    until = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - timedelta(hours=1)
    latencies, cpu, total = [], [], 0
    for _ in range(samples):
        began, used = time.perf_counter(), time.process_time()
        created = await world.count_runs(query, "created", since, until, 60)
        closed = await world.count_runs(query, "closed", since, until, 60)
        latencies.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - used) * 1000)
        total = sum(c.count for c in created) + sum(c.count for c in closed)
    return {
        "query": repr(query.where or query.statuses),
        "counted": total,
        **_summary(latencies, cpu),
    }


def _waterfall(samples: int) -> dict[str, Any]:
    origin = datetime(2024, 1, 1, tzinfo=UTC)
    events: list[EventKind] = [RunCreated(seq=1, at=origin, workflow="w", args=b"")]
    for n in range(1, 3001):
        at = origin + timedelta(milliseconds=n)
        events.append(StepStarted(seq=2 * n, at=at, step=n, attempt=1))
        events.append(StepCompleted(seq=2 * n + 1, at=at, step=n, attempt=1, result=b""))
    latencies, cpu = [], []
    for _ in range(samples):
        began, used = time.perf_counter(), time.process_time()
        draw(layout(events, origin, origin + timedelta(seconds=5), page=25))
        latencies.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - used) * 1000)
    what = "layout + draw of one page of rows"
    return {"steps": 3000, "what": what, **_summary(latencies, cpu)}


async def _limited(world: worlds.World, i: int) -> None:
    await start(order_flow, i, attributes={"pool": Limited(f"p-{i % 10}", 5)}, world=world)


async def measure(url: str, runs: int, samples: int) -> dict[str, Any]:
    world = worlds.open(url)
    async with world:
        fill_seconds, total = await filled(world, runs)
        if not (await world.list_key_slots("pool", 1)):
            async with anyio.create_task_group() as group:
                for i in range(1000):  # 10 values of 100 runs, 5 slots each
                    group.start_soon(_limited, world, i)
        charts = {
            "chart_hour": "/fragments/chart?window=hour",
            "chart_day": "/fragments/chart?window=day",
            "chart_hour_status": "/fragments/chart?status=cancelled",
            "chart_hour_tenant": "/fragments/chart?" + urlencode({"q": "tenant = 't-50'"}),
        }
        results: dict[str, Any] = {}
        warm = "/fragments/chart?workflow=warm-up"
        for name, path in charts.items():
            results[name] = await _fresh(world, path, warm, samples)
        results["chart_hour_cached"] = await _cached(world, charts["chart_hour"], samples * 5)
        results["flow_pool"] = await _fresh(world, "/flow?key=pool", "/flow?key=none", samples)
        results["count_runs_all"] = await _query(world, RunQuery(), samples)
        tenant = (await list_runs(query="tenant = 't-50'", limit=1, world=world)).runs
        assert tenant, "the fill made tenant t-50"
        results["count_runs_tenant"] = await _query(
            world, RunQuery(where=parse("tenant = 't-50'")), samples
        )
        results["waterfall_3000_steps"] = _waterfall(samples)
    return {
        "runs": total,
        "fill_seconds": fill_seconds,
        "samples": samples,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_before": os.getloadavg()[0],
        "pages": results,
    }


def main() -> None:
    cli(__doc__, measure, samples=20)


if __name__ == "__main__":
    main()
