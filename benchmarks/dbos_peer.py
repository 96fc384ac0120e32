"""Peer benchmark: measure DBOS Transact (the ``dbos`` package) on the same workloads.

This script runs in its own process so that our benchmark harness can start it next to
our own runtime in the same run and compare the numbers. It launches DBOS once, with a
fresh SQLite system database (or a PostgreSQL one given by ``--pg-url``), runs a few
warm-up workflows that are not timed, then times one workload and prints a single JSON
line on stdout. DBOS logging, and anything else that would reach stdout, goes to stderr.

Every workflow and step is ``async``; a step only returns ``x + 1``, so the numbers are
the cost of DBOS's durable bookkeeping (one status row per workflow, one checkpoint per
step), not of the work itself.

Workloads:

* ``one_step_sequential``: N one-step workflows, each started and awaited before the
  next one starts (default N=300).
* ``one_step_concurrent``: N one-step workflows with at most C in flight at once
  (default N=1000, C=50).
* ``steps_10``: a workflow of 10 sequential steps, run N times one after another
  (default N=20).
* ``steps_1000``: a workflow of 1000 sequential steps, run N times (default N=1).
* ``one_step_io_concurrent``: like ``one_step_concurrent``, but the step awaits 10 ms
  of I/O (``asyncio.sleep(0.01)``) before returning (default N=1000, C=50).

``seconds`` is the wall time of the timed part only. ``workflows_per_second`` is
N / seconds. ``seconds_per_step`` is seconds / (N * steps per workflow) for the
``steps_*`` workloads and null otherwise. ``concurrency`` is the number of workflows in
flight: C for ``one_step_concurrent``, 1 for the others.

Usage::

    python benchmarks/dbos_peer.py WORKLOAD [--n N] [--concurrency C] [--db-dir DIR]
                                            [--pg-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig  # type: ignore[import-not-found, import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.sqlite_statements import SqliteStatements

STATEMENTS = SqliteStatements()
"""The SQLite statements DBOS sends (through SQLAlchemy's sqlite3 connections)."""


@dataclass(frozen=True)
class Workload:
    default_n: int
    steps: int  # steps per workflow
    concurrent: bool = False
    io: bool = False  # the step awaits 10 ms of I/O (asyncio.sleep) before returning


WORKLOADS: dict[str, Workload] = {
    "one_step_sequential": Workload(default_n=300, steps=1),
    "one_step_concurrent": Workload(default_n=1000, steps=1, concurrent=True),
    "steps_10": Workload(default_n=20, steps=10),
    "steps_1000": Workload(default_n=1, steps=1000),
    "one_step_io_concurrent": Workload(default_n=1000, steps=1, concurrent=True, io=True),
}
DEFAULT_CONCURRENCY = 50
WARMUP_WORKFLOWS = 5


@DBOS.step()
async def add_one(x: int) -> int:
    return x + 1


@DBOS.workflow()
async def one_step_workflow(x: int) -> int:
    return await add_one(x)


@DBOS.step()
async def add_one_io(x: int) -> int:
    await asyncio.sleep(0.01)
    return x + 1


@DBOS.workflow()
async def one_step_io_workflow(x: int) -> int:
    return await add_one_io(x)


@DBOS.workflow()
async def many_steps_workflow(steps: int) -> int:
    x = 0
    for _ in range(steps):
        x = await add_one(x)
    return x


async def run_one(steps: int, x: int, io: bool = False) -> None:
    """Start one workflow, await its result and check it."""
    if io:
        handle = await DBOS.start_workflow_async(one_step_io_workflow, x)
        expected = x + 1
    elif steps == 1:
        handle = await DBOS.start_workflow_async(one_step_workflow, x)
        expected = x + 1
    else:
        handle = await DBOS.start_workflow_async(many_steps_workflow, steps)
        expected = steps
    result = await handle.get_result()
    if result != expected:
        raise RuntimeError(f"workflow returned {result!r}, expected {expected!r}")


async def run_sequential(steps: int, n: int) -> None:
    for i in range(n):
        await run_one(steps, i)


async def run_concurrent(steps: int, n: int, concurrency: int, io: bool = False) -> None:
    semaphore = asyncio.Semaphore(concurrency)

    async def bounded(i: int) -> None:
        async with semaphore:
            await run_one(steps, i, io)

    await asyncio.gather(*(bounded(i) for i in range(n)))


async def measure(workload: Workload, n: int, concurrency: int, spent: dict[str, float]) -> float:
    """Launch DBOS, warm up, and return the wall time of the timed part; ``spent``
    gets its CPU seconds and SQLite statements (``cpu``, ``statements``)."""
    # Launch inside the running loop so DBOS adopts it as its main event loop.
    DBOS.launch()
    # Warm up the same code paths; long workflows are warmed with 10-step ones.
    warmup_steps = min(workload.steps, 10)
    if workload.concurrent:
        await run_concurrent(warmup_steps, WARMUP_WORKFLOWS * 4, concurrency, workload.io)
    else:
        await run_sequential(warmup_steps, WARMUP_WORKFLOWS)

    start, cpu, sent = time.perf_counter(), time.process_time(), STATEMENTS.count
    if workload.concurrent:
        await run_concurrent(workload.steps, n, concurrency, workload.io)
    else:
        await run_sequential(workload.steps, n)
    seconds = time.perf_counter() - start
    spent["cpu"], spent["statements"] = time.process_time() - cpu, STATEMENTS.count - sent
    return seconds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--n", type=int, default=None, help="number of workflows")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="workflows in flight (one_step_concurrent only)",
    )
    parser.add_argument(
        "--db-dir", default=None, help="directory for the SQLite file (default: temp)"
    )
    parser.add_argument("--pg-url", default=None, help="use this PostgreSQL URL instead of SQLite")
    args = parser.parse_args(argv)
    if args.n is not None and args.n < 1:
        parser.error("--n must be at least 1")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workload = WORKLOADS[args.workload]
    n: int = args.n if args.n is not None else workload.default_n
    concurrency: int = args.concurrency if workload.concurrent else 1

    # Keep stdout for the single JSON line; anything else printed goes to stderr.
    real_stdout = sys.stdout
    sys.stdout = sys.stderr

    made_dir: str | None = None
    db_path: str | None = None
    if args.pg_url is not None:
        db_url: str = args.pg_url
    else:
        db_dir: str = args.db_dir or tempfile.mkdtemp(prefix="dbos_peer_")
        if args.db_dir is None:
            made_dir = db_dir
        os.makedirs(db_dir, exist_ok=True)
        db_path = os.path.join(db_dir, f"dbos_peer_{uuid.uuid4().hex[:12]}.sqlite")
        db_url = f"sqlite:///{os.path.abspath(db_path)}"

    config: DBOSConfig = {
        "name": "dbos-peer-bench",
        "system_database_url": db_url,
        "log_level": "WARNING",
        # Pin the version so it does not depend on hashing this file's source.
        "application_version": "dbos-peer-bench",
    }
    try:
        spent: dict[str, float] = {}
        with STATEMENTS:
            DBOS(config=config)
            try:
                seconds = asyncio.run(measure(workload, n, concurrency, spent))
            finally:
                DBOS.destroy(destroy_registry=True)
    finally:
        if made_dir is not None:
            shutil.rmtree(made_dir, ignore_errors=True)
        elif db_path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                if os.path.exists(db_path + suffix):
                    os.remove(db_path + suffix)
        sys.stdout = real_stdout

    result: dict[str, Any] = {
        "peer": "dbos",
        "version": importlib.metadata.version("dbos"),
        "workload": args.workload,
        "n": n,
        "concurrency": concurrency,
        "seconds": seconds,
        "workflows_per_second": n / seconds,
        "seconds_per_step": (seconds / (n * workload.steps) if workload.steps > 1 else None),
        "cpu_ms_per_workflow": 1000 * spent["cpu"] / n,
        "statements_per_workflow": None if args.pg_url else spent["statements"] / n,
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
