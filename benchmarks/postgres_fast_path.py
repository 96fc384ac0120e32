"""What the PostgreSQL world's one-round-trip commits (``commit_run``) buy, in workflows/s.

The same workloads run in one process (worker and client share one world, as
``ours.py``) against two fresh schemas of one server: one world with the fast
path (the default), one with ``PostgresWorld(fast_commits=False)``, which sends
every commit through the general multi-statement transaction. The two settings
alternate within the run, ``--repeat`` times each; the median counts.

Workloads: ``one_step_sequential`` (start one workflow of one step, wait for
its result, N times) and ``steps_10`` (workflows of ten sequential steps, so
commits dominate).

Starts a throwaway durable server with ``tests/pg_server.py`` (``fsync``,
``synchronous_commit`` and ``full_page_writes`` on; ``--fsync-off`` for the
test server's settings) unless ``--pg-url`` is given; the settings in force
are read back into the results. Writes
``benchmarks/results/postgres_fast_path.json``.

Usage::

    python benchmarks/postgres_fast_path.py [--n 200] [--repeat 3]
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
import uuid
from pathlib import Path
from typing import Any

import anyio
import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workflow import Worker, start, step, workflow  # noqa: E402
from worlds.postgres import PostgresWorld  # noqa: E402

WORKLOADS = {"one_step_sequential": 1, "steps_10": 10}
"""Steps per workflow of each workload."""


@step
async def add_one(x: int) -> int:
    return x + 1


@workflow
async def chain(count: int) -> int:
    x = 0
    for _ in range(count):
        x = await add_one(x)
    return x


async def measure(url: str, workload: str, n: int, fast: bool) -> dict[str, Any]:
    """Workflows/s of ``workload`` in a fresh schema of ``url``, with or without the fast path."""
    steps = WORKLOADS[workload]
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    world_url = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    world = PostgresWorld(world_url, fast_commits=fast)
    async with world, Worker(world, [chain], concurrency=64):
        for _ in range(3):  # warm up: connections, statement caches
            assert await (await start(chain, steps, world=world)).result() == steps
        began = time.perf_counter()
        for _ in range(n):
            assert await (await start(chain, steps, world=world)).result() == steps
        seconds = time.perf_counter() - began
    conn = await asyncpg.connect(world.dsn)
    try:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        await conn.close()
    return {
        "workload": workload,
        "fast_path": fast,
        "n": n,
        "seconds": round(seconds, 4),
        "workflows_per_second": round(n / seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="workflows per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per setting")
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help="comma-separated, of " + str(WORKLOADS)
    )
    parser.add_argument("--pg-url", help="a PostgreSQL URL (default: start a server)")
    parser.add_argument(
        "--fsync-off", action="store_true", help="start the server with fsync off (tests' settings)"
    )
    parser.add_argument("--out", default=None, help="results file (default: results/...json)")
    args = parser.parse_args()

    from benchmarks.postgres_durable import server_settings
    from tests import pg_server

    directory = None
    if args.pg_url:
        url = args.pg_url
    else:
        directory = tempfile.mkdtemp(prefix="wf-pg-fast-")
        url = pg_server.start(directory, durable=not args.fsync_off).socket_url
    settings = anyio.run(server_settings, url)
    print(json.dumps({"server": settings}), file=sys.stderr)
    workloads = [w for w in args.workloads.split(",") if w]
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        w: {"fast": [], "general": []} for w in workloads
    }
    try:
        for _ in range(args.repeat):
            for workload in workloads:
                for fast in (True, False):
                    result = anyio.run(measure, url, workload, args.n, fast)
                    runs[workload]["fast" if fast else "general"].append(result)
                    print(json.dumps(result), file=sys.stderr)
    finally:
        if directory is not None:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)

    def median(results: list[dict[str, Any]]) -> float:
        return float(statistics.median(r["workflows_per_second"] for r in results))

    summary: dict[str, Any] = {
        "n": args.n,
        "repeat": args.repeat,
        "server": settings,
        "cpu_count": os.cpu_count(),
        "workloads": {},
        "runs": runs,
    }
    print("| workload | fast path wf/s | general path wf/s | ratio |\n|---|---|---|---|")
    for workload, both in runs.items():
        fast_rate, general_rate = median(both["fast"]), median(both["general"])
        ratio = round(fast_rate / general_rate, 2)
        summary["workloads"][workload] = {
            "fast_workflows_per_second": fast_rate,
            "general_workflows_per_second": general_rate,
            "ratio": ratio,
        }
        print(f"| {workload} | {fast_rate:.1f} | {general_rate:.1f} | {ratio}x |")
    out = (
        Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "postgres_fast_path.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
