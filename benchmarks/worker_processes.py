"""Worker processes on one durable PostgreSQL server: how a backlog drains with 1 and 2.

One Python process runs its event loop on one core; ``wf worker --processes N``
runs N. This measures what that buys on this machine: ``--n`` one-step
workflows (``benchmarks/ours.py``'s ``one_step``) are started first, with no
worker anywhere, into a fresh schema; then ``wf worker benchmarks.ours
--processes P --concurrency C`` is started, and stopped with SIGTERM once every
run has completed (the benchmark counts the completed rows of ``runs`` every
50 ms). The throughput counts from the first completed runs seen (the
processes are up) to the last. The workers' CPU (user + sys of the supervisor
and its worker processes, ``RUSAGE_CHILDREN``, their start-up included), the
server's WAL flushes and its transactions (``pg_stat_wal``,
``pg_stat_database``, less the benchmark's own polls, one transaction each) are
divided by the workflows, and so is the whole machine's busy CPU over the same
time (``/proc/stat``: the server's share is the difference). Each
``--processes`` value is measured ``--repeat`` times, alternating; the median
counts.

Usage::

    python benchmarks/worker_processes.py [--n 3000] [--processes 1,2] [--repeat 3]
        [--concurrency 64] [--pg-url URL]

Starts a durable throwaway server (``tests/pg_server.py``, ``durable=True``)
unless ``--pg-url`` is given. Writes ``benchmarks/results/worker_processes.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402

import worlds  # noqa: E402
from benchmarks.ours import one_step  # noqa: E402
from benchmarks.postgres_durable import (  # noqa: E402
    durable_server,
    server_counters,
    server_settings,
    with_schema,
)
from workflow import start  # noqa: E402

POLL_SECONDS = 0.05
"""How often the benchmark counts the completed runs."""


async def _backlog(url: str, n: int) -> None:
    """Start ``n`` runs of ``one_step`` at ``url``, 64 at a time, with no worker."""
    async with worlds.open(url) as world:
        await world.migrate()
        for first in range(0, n, 64):
            await asyncio.gather(
                *(start(one_step, x, world=world) for x in range(first, min(n, first + 64)))
            )


async def _drained(url: str, schema: str, n: int) -> tuple[int, float, int]:
    """Wait until ``n`` runs in ``schema`` have completed: the polls it took, and the
    time and count when the first completed runs were seen (the workers were up)."""
    conn = await asyncpg.connect(url)
    count = f"SELECT count(*) FROM {schema}.runs WHERE status = 'completed'"
    polls, first_at, first_count = 0, 0.0, 0
    try:
        while True:
            polls += 1
            done = await conn.fetchval(count)
            if done and not first_count:
                first_at, first_count = time.perf_counter(), done
            if done >= n:
                return polls, first_at, first_count
            await asyncio.sleep(POLL_SECONDS)
    finally:
        await conn.close()


def _busy_seconds() -> float:
    """The machine's busy CPU seconds so far, every core (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(url: str, n: int, processes: int, concurrency: int) -> dict[str, Any]:
    """Drain a backlog of ``n`` workflows with ``processes`` worker processes."""
    schema_url = with_schema(url)
    asyncio.run(_backlog(schema_url, n))
    time.sleep(1.0)  # the backlog's stats reach the server's counters
    before = asyncio.run(server_counters(url))
    cpu_before, busy_before = _cpu_of_children(), _busy_seconds()
    command = [sys.executable, "-m", "cli", "worker", "benchmarks.ours", "--world", schema_url]
    command += ["--processes", str(processes), "--concurrency", str(concurrency)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    supervisor = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        polls, first_at, first_count = asyncio.run(
            _drained(url, schema_url.rsplit("schema=", 1)[1], n)
        )
        ended = time.perf_counter()
    finally:
        supervisor.send_signal(signal.SIGTERM)
        code = supervisor.wait(timeout=120)
    cpu, busy = _cpu_of_children() - cpu_before, _busy_seconds() - busy_before
    time.sleep(1.0)
    after = asyncio.run(server_counters(url))
    return {
        "processes": processes,
        "n": n,
        "exit_code": code,
        "seconds": round(ended - began, 3),
        "workflows_per_second": round((n - first_count) / (ended - first_at), 1),
        "cpu_ms_per_workflow": round(cpu * 1000 / n, 3),
        "machine_cpu_ms_per_workflow": round(busy * 1000 / n, 3),
        "wal_syncs_per_workflow": round((after["wal_syncs"] - before["wal_syncs"]) / n, 2),
        "commits_per_workflow": round((after["commits"] - before["commits"] - polls) / n, 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="workflows in each backlog")
    parser.add_argument("--processes", default="1,2", help="worker process counts to measure")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64, help="each process's slots")
    parser.add_argument("--pg-url", help="a TCP URL of a durable server (default: start one)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    counts = [int(part) for part in args.processes.split(",")]

    runs: dict[int, list[dict[str, Any]]] = {count: [] for count in counts}
    with durable_server(args.pg_url, "wf-pg-processes-") as url:
        settings = asyncio.run(server_settings(url))
        for _ in range(args.repeat):
            for count in counts:
                result = measure(url, args.n, count, args.concurrency)
                runs[count].append(result)
                print(json.dumps(result), file=sys.stderr)

    def median(count: int, name: str) -> float:
        return float(statistics.median(r[name] for r in runs[count]))

    base = median(counts[0], "workflows_per_second")
    table = {
        str(count): {
            "workflows_per_second": median(count, "workflows_per_second"),
            "speedup": round(median(count, "workflows_per_second") / base, 2),
            "cpu_ms_per_workflow": median(count, "cpu_ms_per_workflow"),
            "machine_cpu_ms_per_workflow": median(count, "machine_cpu_ms_per_workflow"),
            "wal_syncs_per_workflow": median(count, "wal_syncs_per_workflow"),
            "commits_per_workflow": median(count, "commits_per_workflow"),
        }
        for count in counts
    }
    summary = {
        "server": settings,
        "cpu_count": os.cpu_count(),
        "n": args.n,
        "concurrency": args.concurrency,
        "repeat": args.repeat,
        "processes": table,
        "runs": {str(count): results for count, results in runs.items()},
    }
    out = args.out or ROOT / "benchmarks" / "results" / "worker_processes.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
