"""Throughput of one-step workflows on PostgreSQL with 1, 2 and 4 worker processes, and DBOS.

The step awaits 10 ms of I/O (``asyncio.sleep(0.01)``), so a worker process is
limited by how many items it runs at once (``--concurrency``, per process),
not by the machine's cores: more processes should mean proportionally more
throughput. For each process count, a fresh schema is used, ``wf worker``
processes serve it, and the client (this process) starts N workflows with at
most ``--in-flight`` starts pending, then waits for every result; the time is
from the first start to the last result. DBOS runs the same workload
(``benchmarks/dbos_peer.py one_step_io_concurrent``) on the same server in the
same run, at several in-flight limits; its best counts.

Starts a throwaway durable server with ``tests/pg_server.py`` (``fsync``,
``synchronous_commit`` and ``full_page_writes`` on, as ``postgres_durable.py``;
``--fsync-off`` for the test server's settings) unless ``--pg-url`` is given;
the settings in force are read back from the server into the results. Writes
``benchmarks/results/postgres_scaling.json``.

On a machine with fewer cores than worker processes (2 cores here, shared by
the server, the workers and the client), the processes share the cores: the
figures show whether adding processes adds throughput when each worker is
limited by its own concurrency and the step's I/O (``--concurrency`` small),
not how 4 processes scale on 4 cores.

Usage::

    python benchmarks/postgres_scaling.py [--n 2000] [--concurrency 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import worlds  # noqa: E402
from workflow import start, step, workflow  # noqa: E402

PROCESS_COUNTS = (1, 2, 4)
DBOS_IN_FLIGHT = (50, 200, 1000)


@step
async def io_add_one(x: int) -> int:
    await asyncio.sleep(0.01)
    return x + 1


@workflow
async def io_one_step(x: int) -> int:
    return await io_add_one(x)


async def _drive(url: str, n: int, in_flight: int) -> float:
    """Start ``n`` workflows (at most ``in_flight`` starts pending) and await them all."""
    world = worlds.open(url)
    async with world:
        limit = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with limit:
                run = await start(io_one_step, i, world=world)
            assert await run.result(timeout=300) == i + 1

        await asyncio.gather(*(one(i) for i in range(min(n, 50))))  # warm-up, untimed
        began = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - began


def measure_ours(base_url: str, processes: int, n: int, concurrency: int) -> dict[str, Any]:
    """Workflows/s with ``processes`` ``wf worker`` processes on a fresh schema."""
    sep = "&" if "?" in base_url else "?"
    url = f"{base_url}{sep}schema=bench_{uuid.uuid4().hex[:12]}"
    asyncio.run(worlds.open(url).migrate())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "worker", "benchmarks.postgres_scaling"]
    command += ["--world", url, "--concurrency", str(concurrency)]
    workers = [
        subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    try:
        time.sleep(2.0)  # let every worker import and connect before timing
        seconds = anyio.run(_drive, url, n, max(64, processes * concurrency * 2))
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=30)
    return {
        "peer": "ours",
        "processes": processes,
        "concurrency_per_process": concurrency,
        "n": n,
        "seconds": round(seconds, 4),
        "workflows_per_second": round(n / seconds, 2),
    }


def measure_dbos(tcp_url: str, n: int, in_flight: int) -> dict[str, Any]:
    """DBOS's workflows/s on the same server, in a database of its own."""
    database = f"dbos_{uuid.uuid4().hex[:8]}"
    pg_url = tcp_url.rsplit("/", 1)[0] + f"/{database}"
    command = [sys.executable, str(ROOT / "benchmarks" / "dbos_peer.py")]
    command += ["one_step_io_concurrent", "--n", str(n), "--concurrency", str(in_flight)]
    done = subprocess.run(
        [*command, "--pg-url", pg_url], capture_output=True, text=True, check=True, timeout=900
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="workflows per measurement")
    parser.add_argument(
        "--concurrency", type=int, default=64, help="items in flight per worker (its default)"
    )
    parser.add_argument(
        "--processes", default="1,2,4", help="worker process counts, comma-separated"
    )
    parser.add_argument(
        "--dbos-in-flight",
        default=",".join(map(str, DBOS_IN_FLIGHT)),
        help="DBOS in-flight limits, comma-separated (empty: skip DBOS)",
    )
    parser.add_argument("--out", default=None, help="results file (default: results/...json)")
    parser.add_argument("--repeat", type=int, default=2, help="measurements per setting")
    parser.add_argument("--pg-url", help="a TCP PostgreSQL URL (default: start a server)")
    parser.add_argument(
        "--fsync-off", action="store_true", help="start the server with fsync off (tests' settings)"
    )
    args = parser.parse_args()

    from benchmarks.postgres_durable import server_settings
    from tests import pg_server

    directory = None
    if args.pg_url:
        tcp_url = url = args.pg_url
    else:
        directory = tempfile.mkdtemp(prefix="wf-pg-bench-")
        server = pg_server.start(directory, durable=not args.fsync_off)
        tcp_url, url = server.url, server.socket_url
    try:
        settings = asyncio.run(server_settings(tcp_url))
        print(json.dumps({"server": settings}), file=sys.stderr)
        counts = [int(c) for c in args.processes.split(",") if c]
        limits = [int(c) for c in args.dbos_in_flight.split(",") if c]
        ours: dict[int, list[dict[str, Any]]] = {count: [] for count in counts}
        dbos: dict[int, list[dict[str, Any]]] = {limit: [] for limit in limits}
        for _ in range(args.repeat):
            for count in counts:
                ours[count].append(measure_ours(url, count, args.n, args.concurrency))
                print(json.dumps(ours[count][-1]), file=sys.stderr)
            for limit in limits:
                dbos[limit].append(measure_dbos(tcp_url, args.n, limit))
                print(json.dumps(dbos[limit][-1]), file=sys.stderr)
    finally:
        if directory is not None:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)

    def median(results: list[dict[str, Any]]) -> float:
        return float(statistics.median(r["workflows_per_second"] for r in results))

    rates = {count: median(results) for count, results in ours.items()}
    dbos_rates = {limit: median(results) for limit, results in dbos.items()}
    best_dbos = max(dbos_rates.values(), default=None)
    top = max(rates)
    summary = {
        "workload": "one-step workflows, the step awaits 10 ms of I/O",
        "server": settings,
        "n": args.n,
        "repeat": args.repeat,
        "concurrency_per_process": args.concurrency,
        "cpu_count": os.cpu_count(),
        "ours_workflows_per_second": {str(k): v for k, v in rates.items()},
        "dbos_workflows_per_second": {f"in_flight_{k}": v for k, v in dbos_rates.items()},
        f"ratio_{top}_vs_1_processes": round(rates[top] / rates[1], 2) if 1 in rates else None,
        f"ratio_{top}_processes_vs_best_dbos": round(rates[top] / best_dbos, 2)
        if best_dbos
        else None,
        "runs": {"ours": ours, "dbos": dbos},
    }
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / "postgres_scaling.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"server: {settings}")
    print("| setting | workflows/s |\n|---|---|")
    for count, rate in rates.items():
        print(f"| ours, {count} worker process(es) x {args.concurrency} | {rate:.1f} |")
    for limit, rate in dbos_rates.items():
        print(f"| DBOS, {limit} in flight | {rate:.1f} |")
    print(f"\n{top} vs 1 processes: {summary[f'ratio_{top}_vs_1_processes']}x; ", end="")
    print(f"{top} processes vs best DBOS: {summary[f'ratio_{top}_processes_vs_best_dbos']}x")


if __name__ == "__main__":
    main()
