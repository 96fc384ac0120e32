"""Schedules at scale: N schedules firing every minute, one worker.

1. Creates N schedules (default 10,000) of a trivial workflow with
   ``every=60s`` on a fresh world (SQLite by default): every schedule fires
   at the same instant, the top of each minute, the worst case for lateness.
2. Runs one in-process ``Worker`` for ``--minutes`` fire rounds and measures
   this process's CPU time (``time.process_time``: the worker and the world's
   SQLite thread; on PostgreSQL the server's CPU is not included), the fires
   (runs carrying ``$schedule``) and each fire's lateness: the run's
   ``created_at`` minus its ``$scheduled_at``.
3. Idle: the same number of schedules that are not due (hourly, next fire
   past the measurement unless it crosses the top of an hour: ``fires`` in
   the output says) and a worker for ``--idle-seconds``: the CPU a worker
   spends on schedules that have nothing to do.
4. Baseline: starts the same number of runs of the same workflow with
   ``start()`` (not timed) and measures the CPU a worker takes to execute
   them, so ``fire_cpu_us`` = (CPU with schedules - baseline CPU) / fires is
   what firing costs on top of running the workflow.

Fires are created in batches (``World.fire_schedules``: one transaction for
every due fire of a lease batch), so ``fires`` should equal ``fires_expected``
and ``duplicate_fire_times`` be 0 on every world. ``--postgres`` starts a
durable PostgreSQL server of its own (``tests/pg_server.py``) and runs there.

Prints one JSON object; ``--out`` also writes it to a file.

Usage::

    python benchmarks/schedules.py [--schedules 10000] [--minutes 2] [--world URL | --postgres]
        [--skip-baseline] [--out benchmarks/results/schedules.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import worlds
from workflow import RunStatus, Worker, list_runs, start, workflow
from workflow.schedules import create_schedule
from worlds.query import RunQuery
from worlds.types import RunRecord


@workflow
async def minutely(n: int) -> int:
    return n


async def _create(world: worlds.World, count: int) -> float:
    began = time.perf_counter()
    batch = 100
    for first in range(0, count, batch):
        async with anyio.create_task_group() as group:
            for i in range(first, min(first + batch, count)):
                group.start_soon(_one, world, i)
    return time.perf_counter() - began


async def _one(world: worlds.World, i: int) -> None:
    await create_schedule(minutely, i, id=f"bench-{i:05d}", every=timedelta(minutes=1), world=world)


async def _all_runs(world: worlds.World) -> list[RunRecord]:
    found: list[RunRecord] = []
    cursor = None
    while True:
        page = await world.list_runs(RunQuery(limit=1000, cursor=cursor))
        found += page.runs
        cursor = page.next_cursor
        if cursor is None:
            return found


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def scheduled(url: str, count: int, minutes: int) -> dict[str, Any]:
    async with worlds.open(url) as world:
        created_in = await _create(world, count)
        now = datetime.now(UTC)
        first_fire = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        # the worker starts just before the first fire and stops after the last round
        await anyio.sleep(max(0.0, (first_fire - now).total_seconds() - 2.0))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        async with Worker(world, [minutely], concurrency=256):
            end = first_fire + timedelta(minutes=minutes - 1, seconds=40)
            await anyio.sleep((end - datetime.now(UTC)).total_seconds())
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        records = await _all_runs(world)
    fired = [r for r in records if "$schedule" in r.attributes]
    lateness = [
        (r.created_at - r.attributes["$scheduled_at"]).total_seconds() * 1000 for r in fired
    ]
    completed = sum(1 for r in fired if r.status is RunStatus.COMPLETED)
    return {
        "schedules": count,
        "create_seconds": round(created_in, 2),
        "rounds": minutes,
        "fires": len(fired),
        "fires_expected": count * minutes,
        "runs_completed": completed,
        "duplicate_fire_times": len(fired)
        - len({(r.attributes["$schedule"], r.attributes["$scheduled_at"]) for r in fired}),
        "worker_cpu_seconds": round(cpu, 2),
        "worker_wall_seconds": round(wall, 2),
        "cpu_us_per_fire_and_run": round(cpu / max(len(fired), 1) * 1e6, 1),
        "lateness_ms_p50": round(statistics.median(lateness), 1) if lateness else None,
        "lateness_ms_p99": round(_percentile(lateness, 0.99), 1) if lateness else None,
        "lateness_ms_max": round(max(lateness), 1) if lateness else None,
    }


async def idle(url: str, count: int, seconds: float) -> dict[str, Any]:
    async with worlds.open(url) as world:
        for first in range(0, count, 100):
            async with anyio.create_task_group() as group:
                for i in range(first, min(first + 100, count)):
                    group.start_soon(_hourly, world, i)
        cpu0 = time.process_time()
        async with Worker(world, [minutely]):
            await anyio.sleep(seconds)
        cpu = time.process_time() - cpu0
        runs = await _all_runs(world)
    return {
        "schedules": count,
        "seconds": seconds,
        "fires": len(runs),
        "worker_cpu_seconds": round(cpu, 3),
        "worker_cpu_percent": round(100 * cpu / seconds, 2),
    }


async def _hourly(world: worlds.World, i: int) -> None:
    await create_schedule(minutely, i, id=f"idle-{i:05d}", cron="0 * * * *", world=world)


async def _start(world: worlds.World, i: int) -> None:
    await start(minutely, i, world=world)


async def baseline(url: str, runs: int) -> dict[str, Any]:
    async with worlds.open(url) as world:
        for first in range(0, runs, 200):
            async with anyio.create_task_group() as group:
                for i in range(first, min(first + 200, runs)):
                    group.start_soon(_start, world, i)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        async with Worker(world, [minutely], concurrency=256):
            with anyio.move_on_after(600):
                while True:
                    done = await list_runs(status=RunStatus.PENDING, limit=1, world=world)
                    running = await list_runs(status=RunStatus.RUNNING, limit=1, world=world)
                    if not done.runs and not running.runs:
                        break
                    await anyio.sleep(0.2)
        return {
            "runs": runs,
            "worker_cpu_seconds": round(time.process_time() - cpu0, 2),
            "worker_wall_seconds": round(time.perf_counter() - wall0, 2),
        }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--world", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--postgres", action="store_true", help="start a durable server")
    parser.add_argument("--skip-baseline", action="store_true", help="no start-then-run baseline")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    directory = None
    if args.postgres:
        from tests import pg_server

        directory = tempfile.mkdtemp(prefix="wf-pg-schedules-")
        args.world = pg_server.start(directory, durable=True).url
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = args.world or f"sqlite:///{tmp}/schedules.db"
            fired = await scheduled(url, args.schedules, args.minutes)
            base = {"worker_cpu_seconds": 0.0}
            if not args.skip_baseline:
                base_url = _fresh(args.world, "baseline") or f"sqlite:///{tmp}/baseline.db"
                base = await baseline(base_url, fired["fires"])
            idle_url = _fresh(args.world, "idle") or f"sqlite:///{tmp}/idle.db"
            quiet = await idle(idle_url, args.schedules, args.idle_seconds)
    finally:
        if directory is not None:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
    extra = fired["worker_cpu_seconds"] - base["worker_cpu_seconds"]
    result = {
        "world": "sqlite" if args.world is None else args.world.split(":", 1)[0],
        "load_average_1m_at_end": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
        "scheduled": fired,
        "baseline_start_then_run": base,
        "fire_cpu_us": round(extra / max(fired["fires"], 1) * 1e6, 1),
        "idle": quiet,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


def _fresh(url: str | None, schema: str) -> str | None:
    """``url`` in a schema of its own (PostgreSQL), so each part starts empty."""
    if url is None or not url.startswith("postgres"):
        return url
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


if __name__ == "__main__":
    anyio.run(main)
