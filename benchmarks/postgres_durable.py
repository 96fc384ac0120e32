"""Ours against DBOS on one durable PostgreSQL server: one worker process, 1-step workflows.

Starts its own server with ``tests/pg_server.py`` and ``durable=True``:
``fsync=on``, ``synchronous_commit=on``, ``full_page_writes=on`` (the test
server runs with all three off); the settings in force are read back from the
server (``SHOW``) into the results, with ``wal_sync_method``. Both peers use
that one server in the same run, alternating, ``--repeat`` times each; the
median counts.

- ours: ``benchmarks/ours.py WORKLOAD --world URL`` (a worker and the client
  in one process, one world object, a fresh schema per measurement);
- DBOS: ``benchmarks/dbos_peer.py WORKLOAD --pg-url URL`` (its own fresh
  database per measurement on the same server).

Workloads: ``one_step_sequential`` (start, await the result, N times) and
``one_step_concurrent`` at ``--in-flight`` (default 64) workflows in flight.
The step returns ``x + 1``: the figures are the cost of each runtime's
durable bookkeeping. Next to each throughput, the server's own counters say
what one workflow cost it (``pg_stat_wal.wal_sync``: WAL flushes, each an
``fdatasync``; ``pg_stat_database.xact_commit``: transactions, reads
included), counted over the whole measurement, warm-up workflows included
(5 of 300 or 20 of 2,000): these do not depend on how busy the machine is.
The steady-state columns subtract, per peer and workload, a run of the same
process with one timed workflow (its setup and warm-ups), measured once, and
divide by the other workflows: what one more workflow costs the server.
With ``--round-trips``, ours also runs once through
``tests/pg_round_trips.RoundTripProxy`` and reports the protocol round trips
per workflow (sequential), counted as the server's ``ReadyForQuery`` messages.

Writes ``benchmarks/results/postgres_durable.json`` and prints a table.

Usage::

    python benchmarks/postgres_durable.py [--repeat 3] [--round-trips] [--pg-url URL] [--uvloop]

``--uvloop`` runs ours on uvloop's event loop (``benchmarks/ours.py --uvloop``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WORKLOADS = {"one_step_sequential": 300, "one_step_concurrent": 2000}
"""Workload: workflows per measurement."""
SETTINGS = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "server_version")


async def server_settings(url: str) -> dict[str, str]:
    """The durability settings the server at ``url`` runs with."""
    conn = await asyncpg.connect(url)
    try:
        return {name: str(await conn.fetchval(f"SHOW {name}")) for name in SETTINGS}
    finally:
        await conn.close()


def with_schema(url: str) -> str:
    """``url`` with a fresh ``schema`` option."""
    return f"{url}{'&' if '?' in url else '?'}schema=bench_{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def durable_server(pg_url: str | None, prefix: str) -> Iterator[str]:
    """The URL of ``pg_url``'s server, or of a durable throwaway one (stopped after)."""
    if pg_url:
        yield pg_url
        return
    from tests import pg_server

    directory = tempfile.mkdtemp(prefix=prefix)
    try:
        yield pg_server.start(directory, durable=True).url
    finally:
        pg_server.stop(directory)
        shutil.rmtree(directory, ignore_errors=True)


def _last_json(command: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        command, capture_output=True, text=True, check=True, timeout=900, cwd=ROOT, env=env
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def server_counters(url: str) -> dict[str, int]:
    """The server's WAL flushes and committed transactions so far (all databases)."""
    conn = await asyncpg.connect(url)
    try:
        return {
            "wal_syncs": int(await conn.fetchval("SELECT wal_sync FROM pg_stat_wal")),
            "commits": int(await conn.fetchval("SELECT sum(xact_commit) FROM pg_stat_database")),
        }
    finally:
        await conn.close()


def _counted(url: str, n: int, command: list[str]) -> dict[str, Any]:
    """Run ``command`` and add the server's WAL flushes and commits per workflow."""
    time.sleep(1.0)  # let the stats of the previous measurement reach the counters
    before = asyncio.run(server_counters(url))
    result = _last_json(command)
    time.sleep(1.0)
    after = asyncio.run(server_counters(url))
    for name in before:
        result[name] = after[name] - before[name]
        result[f"{name}_per_workflow"] = round(result[name] / n, 2)
    return result


def steady(result: dict[str, Any], baseline: dict[str, Any], name: str) -> float:
    """Counter ``name`` per workflow in the steady state: ``result``'s total less that
    of ``baseline``, the same process with one timed workflow (its setup: a fresh
    schema or database, the first connections, the warm-ups), over the other workflows."""
    return round((result[name] - baseline[name]) / (result["n"] - baseline["n"]), 2)


def measure_ours(
    url: str, workload: str, n: int, in_flight: int, uvloop: bool = False
) -> dict[str, Any]:
    """Our workflows/s, one process (worker and client), in a fresh schema of ``url``."""
    command = [sys.executable, str(ROOT / "benchmarks" / "ours.py"), workload, "--n", str(n)]
    command += ["--concurrency", str(in_flight), "--world", with_schema(url)]
    command += ["--uvloop"] if uvloop else []
    return _counted(url, n, command)


def measure_dbos(tcp_url: str, workload: str, n: int, in_flight: int) -> dict[str, Any]:
    """DBOS's workflows/s on the same server, in a database of its own."""
    pg_url = tcp_url.rsplit("/", 1)[0] + f"/dbos_{uuid.uuid4().hex[:8]}"
    command = [sys.executable, str(ROOT / "benchmarks" / "dbos_peer.py"), workload]
    command += ["--n", str(n), "--concurrency", str(in_flight), "--pg-url", pg_url]
    return _counted(tcp_url, n, command)


async def count_round_trips(host: str, port: int, n: int) -> dict[str, Any]:
    """Protocol round trips per 1-step workflow, sequential, through a counting proxy."""
    from tests.pg_round_trips import RoundTripProxy
    from workflow import Worker, start, step, workflow
    from worlds.postgres import PostgresWorld

    @step
    async def add_one(x: int) -> int:
        return x + 1

    @workflow
    async def counted_one_step(x: int) -> int:
        return await add_one(x)

    async with RoundTripProxy(host, port) as proxy:
        url = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres?sslmode=disable"
        world = PostgresWorld(with_schema(url))
        async with world, Worker(world, [counted_one_step]):
            for i in range(10):  # warm-up: connections, prepared statements
                assert await (await start(counted_one_step, i, world=world)).result() == i + 1
            before, began = proxy.round_trips, time.perf_counter()
            for i in range(n):
                assert await (await start(counted_one_step, i, world=world)).result() == i + 1
            seconds = time.perf_counter() - began
            trips = proxy.round_trips - before
    return {
        "workflows": n,
        "round_trips": trips,
        "round_trips_per_workflow": round(trips / n, 2),
        "note": "includes the worker's idle polls and lease renewals in that time",
        "seconds": round(seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measurements per peer")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply each workload's N")
    parser.add_argument("--round-trips", action="store_true", help="also count round trips")
    parser.add_argument("--pg-url", help="a TCP URL of a durable server (default: start one)")
    parser.add_argument("--uvloop", action="store_true", help="ours on uvloop's event loop")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    with durable_server(args.pg_url, "wf-pg-durable-") as url:
        settings = asyncio.run(server_settings(url))
        print(json.dumps({"server": settings}), file=sys.stderr)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            w: {"ours": [], "dbos": []} for w in WORKLOADS
        }
        # each peer's setup and warm-ups alone, once: subtracted for the steady state
        baselines = {
            workload: {
                "ours": measure_ours(url, workload, 1, args.in_flight, args.uvloop),
                "dbos": measure_dbos(url, workload, 1, args.in_flight),
            }
            for workload in WORKLOADS
        }
        for _ in range(args.repeat):
            for workload, default_n in WORKLOADS.items():
                n = max(1, int(default_n * args.scale))
                ours = measure_ours(url, workload, n, args.in_flight, args.uvloop)
                runs[workload]["ours"].append(ours)
                runs[workload]["dbos"].append(measure_dbos(url, workload, n, args.in_flight))
                print(json.dumps(runs[workload]), file=sys.stderr)
        trips = None
        if args.round_trips:
            host_port = url.split("@", 1)[1].split("/", 1)[0]
            host, port = host_port.rsplit(":", 1)
            trips = asyncio.run(count_round_trips(host, int(port), 100))

    def median(results: list[dict[str, Any]]) -> float:
        return float(statistics.median(r["workflows_per_second"] for r in results))

    def per_workflow(results: list[dict[str, Any]], name: str) -> float:
        return float(statistics.median(r[f"{name}_per_workflow"] for r in results))

    table = {
        workload: {
            "ours_workflows_per_second": median(both["ours"]),
            "dbos_workflows_per_second": median(both["dbos"]),
            "ratio": round(median(both["ours"]) / median(both["dbos"]), 2),
            "ours_wal_syncs_per_workflow": per_workflow(both["ours"], "wal_syncs"),
            "dbos_wal_syncs_per_workflow": per_workflow(both["dbos"], "wal_syncs"),
            "ours_commits_per_workflow": per_workflow(both["ours"], "commits"),
            "dbos_commits_per_workflow": per_workflow(both["dbos"], "commits"),
            **{
                f"{peer}_steady_{name}_per_workflow": float(
                    statistics.median(
                        steady(r, baselines[workload][peer], name) for r in both[peer]
                    )
                )
                for peer in ("ours", "dbos")
                for name in ("wal_syncs", "commits")
            },
        }
        for workload, both in runs.items()
    }
    summary = {
        "server": settings,
        "cpu_count": os.cpu_count(),
        "repeat": args.repeat,
        "in_flight": args.in_flight,
        "event_loop": "uvloop" if args.uvloop else "asyncio",
        "workloads": table,
        "round_trips": trips,
        "runs": runs,
        "baselines": baselines,
    }
    out = args.out or ROOT / "benchmarks" / "results" / "postgres_durable.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"server: {settings}")
    print(
        "| workload | ours wf/s | DBOS wf/s | ours / DBOS | WAL flushes per workflow "
        "(ours / DBOS) | transactions per workflow (ours / DBOS) | steady state: WAL flushes, "
        "transactions (ours / DBOS) |\n|---|---|---|---|---|---|---|"
    )
    for workload, row in table.items():
        print(
            f"| {workload} | {row['ours_workflows_per_second']:.1f} "
            f"| {row['dbos_workflows_per_second']:.1f} | {row['ratio']}x "
            f"| {row['ours_wal_syncs_per_workflow']} / {row['dbos_wal_syncs_per_workflow']} "
            f"| {row['ours_commits_per_workflow']} / {row['dbos_commits_per_workflow']} "
            f"| {row['ours_steady_wal_syncs_per_workflow']}, "
            f"{row['ours_steady_commits_per_workflow']} / "
            f"{row['dbos_steady_wal_syncs_per_workflow']}, "
            f"{row['dbos_steady_commits_per_workflow']} |"
        )
    if trips is not None:
        print(f"round trips per 1-step workflow (sequential): {trips['round_trips_per_workflow']}")


if __name__ == "__main__":
    main()
