"""What one workflow costs a world: CPU milliseconds and statements, on SQLite and PostgreSQL.

The core workloads of ``run_core.py`` (a worker and the client in one process,
as ``ours.py`` runs them), each in a fresh process, measured two ways:

- **CPU**: ``time.process_time()`` (user + sys of every thread of the process:
  the event loop, aiosqlite's thread, the checkpointer) over the measured
  workflows, warm-ups excluded, per workflow; the median of ``--repeat`` runs.
  Less noisy than wall time on a shared machine, but not noise-free.
- **Instructions** (``--instructions``): the process run under valgrind's
  callgrind twice, with few and with more workflows; the difference in
  instructions executed, per workflow, is what the added workflows cost
  (start-up, imports and warm-ups cancel out). Deterministic up to thread
  scheduling, so it tells a few percent apart where CPU time on a shared
  machine cannot.
- **Statements**: SQLite: every statement the world's connections execute
  (``sqlite3`` trace callback; background checkpoints excluded), per workflow.
  PostgreSQL: round trips on the wire (``tests/pg_round_trips.RoundTripProxy``
  counts the server's ``ReadyForQuery``), per workflow. Counted in a run of
  its own, so the counting costs the CPU figures nothing. Statements and
  instructions are counted on an SQLite world that polls every 5 s
  (``?poll=5``): what a workflow costs, not how often an idle worker looked.

``--tree DIR`` measures another checkout (``git archive main | tar -x -C DIR``:
the figures before a change); given twice, the two trees' runs alternate, so
the machine's noise hits both alike. PostgreSQL runs against a throwaway
server (``tests/pg_server.py``, fsync off) unless ``--pg-url`` is given.
Prints one JSON line per (tree, world, workload) and a Markdown table.

Usage::

    python benchmarks/world_costs.py [--tree DIR [--tree DIR]] [--repeat 3] [--instructions]
"""

from __future__ import annotations

import argparse
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

HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
N = {"one_step_sequential": 100, "one_step_concurrent": 200, "steps_10": 10, "steps_1000": 1}
STEPS = {"one_step_sequential": 1, "one_step_concurrent": 1, "steps_10": 10, "steps_1000": 1000}
IN_FLIGHT = 64


def child(workload: str, url: str, mode: str, n: int, warmups: int) -> dict[str, Any]:
    """Run ``workload`` once in this process; its cost per measured workflow."""
    import asyncio
    import sqlite3

    import anyio

    counted = {"on": False, "statements": 0}
    if mode == "count" and url.startswith("sqlite"):
        connect = sqlite3.connect

        def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            db = connect(*args, **kwargs)

            def seen(statement: str) -> None:
                if counted["on"] and not statement.startswith("PRAGMA wal_checkpoint"):
                    counted["statements"] += 1

            db.set_trace_callback(seen)
            return db

        sqlite3.connect = traced  # type: ignore[assignment]

    import worlds
    from benchmarks.ours import many_steps, one_step  # the workflows of run_core.py's workloads
    from workflow import Worker, start

    steps = STEPS[workload]

    async def measure(world_url: str, trips: Any) -> dict[str, Any]:
        world = worlds.open(world_url)
        async with world, Worker(world, [one_step, many_steps], concurrency=128):

            async def once(i: int) -> None:
                if steps == 1:
                    assert await (await start(one_step, i, world=world)).result() == i + 1
                else:
                    assert await (await start(many_steps, steps, world=world)).result() == steps

            for i in range(warmups):
                await once(i)
            counted["on"] = True
            trips_before = 0 if trips is None else trips.round_trips
            cpu = time.process_time()
            if workload == "one_step_concurrent":
                limit = asyncio.Semaphore(IN_FLIGHT)

                async def bounded(i: int) -> None:
                    async with limit:
                        await once(i)

                await asyncio.gather(*(bounded(i) for i in range(n)))
            else:
                for i in range(n):
                    await once(i)
            cpu = time.process_time() - cpu
            counted["on"] = False
            if trips is not None:
                counted["statements"] = trips.round_trips - trips_before
        return {"cpu_ms": 1000 * cpu / n, "statements": counted["statements"] / n}

    async def main() -> dict[str, Any]:
        if mode == "count" and url.startswith("postgres"):
            from tests.pg_round_trips import RoundTripProxy, server_address

            host, port = server_address(url)
            async with RoundTripProxy(host, port) as proxy:
                query = url.partition("?")[2]
                schema = dict(p.split("=", 1) for p in query.split("&") if "=" in p)["schema"]
                return await measure(f"{proxy.url()}&schema={schema}", proxy)
        return await measure(url, None)

    return anyio.run(main)


def run(
    tree: Path, workload: str, url: str, mode: str, n: int | None = None, warmups: int = 5
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    command = [sys.executable, str(HERE), "--child", workload, "--url", url, "--mode", mode]
    command += ["--n", str(N[workload] if n is None else n), "--warmups", str(warmups)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        if mode == "instructions":
            command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
        if done.returncode:
            raise RuntimeError(done.stderr)
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        if mode == "instructions":
            summary = next(line for line in out.read_text().splitlines() if line[:8] == "summary:")
            result["instructions"] = int(summary.split()[1])
    return result


FEW = {"one_step_sequential": 20, "one_step_concurrent": 40, "steps_10": 2, "steps_1000": 1}
"""Workflows of the smaller run of ``--instructions`` (the larger runs ``N``, 2 for 1000 steps)."""


def instructions(tree: Path, workload: str, url: str, url2: str) -> float:
    """Instructions per workflow: the difference of two callgrind runs, per added workflow."""
    few, more = FEW[workload], (2 if workload == "steps_1000" else N[workload])
    small = run(tree, workload, url, "instructions", few, warmups=1)["instructions"]
    large = run(tree, workload, url2, "instructions", more, warmups=1)["instructions"]
    return (large - small) / (more - few)


def url_for(kind: str, tmp: str, pg_url: str | None, *, quiet: bool = False) -> str:
    """A fresh world's URL; ``quiet``: SQLite polls every 5 s, so an idle worker's
    polls (many more per workflow under valgrind's slowdown) do not blur the counts."""
    if kind == "sqlite":
        return f"sqlite:///{tmp}/{uuid.uuid4().hex}.db" + ("?poll=5" if quiet else "")
    assert pg_url is not None
    separator = "&" if "?" in pg_url else "?"
    return f"{pg_url}{separator}schema=costs_{uuid.uuid4().hex[:12]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, action="append")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worlds", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--workloads", nargs="+", default=list(N), choices=list(N))
    parser.add_argument("--pg-url")
    parser.add_argument("--child")
    parser.add_argument("--url")
    parser.add_argument("--mode", choices=["cpu", "count", "instructions"])
    parser.add_argument("--n", type=int)
    parser.add_argument("--warmups", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="callgrind counts too")
    args = parser.parse_args()
    if args.child:
        mode = "cpu" if args.mode == "instructions" else args.mode
        print(json.dumps(child(args.child, args.url, mode, args.n, args.warmups)))
        return
    sys.path.insert(0, str(ROOT))
    from tests import pg_server

    trees: list[Path] = args.tree or [ROOT]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        pg_url = args.pg_url
        if "postgres" in args.worlds and pg_url is None:
            server = Path(tempfile.mkdtemp(prefix="wf-pg-costs-"))  # the server's user owns it
            pg_url = pg_server.start(server).socket_url
        try:
            for kind in args.worlds:
                for workload in args.workloads:
                    cpu: dict[Path, list[float]] = {tree: [] for tree in trees}
                    for _ in range(args.repeat):
                        for tree in trees:  # alternating: noise hits every tree alike
                            url = url_for(kind, tmp, pg_url)
                            cpu[tree].append(run(tree, workload, url, "cpu")["cpu_ms"])
                    for tree in trees:
                        count = run(tree, workload, url_for(kind, tmp, pg_url, quiet=True), "count")
                        ir = None
                        if args.instructions:
                            urls = (
                                url_for(kind, tmp, pg_url, quiet=True),
                                url_for(kind, tmp, pg_url, quiet=True),
                            )
                            ir = round(instructions(tree, workload, *urls))
                        row = {
                            "tree": str(tree),
                            "world": kind,
                            "workload": workload,
                            "n": N[workload],
                            "cpu_ms_per_workflow": round(statistics.median(cpu[tree]), 3),
                            "cpu_ms_samples": [round(c, 3) for c in cpu[tree]],
                            "statements_per_workflow": round(count["statements"], 2),
                            "instructions_per_workflow": ir,
                        }
                        print(json.dumps(row), file=sys.stderr)
                        rows.append(row)
        finally:
            if server is not None:
                pg_server.stop(server)
                shutil.rmtree(server, ignore_errors=True)
    print(
        "| tree | world | workload | CPU ms/workflow (median) | statements/workflow "
        "| instructions/workflow |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        count = r["instructions_per_workflow"]
        shown = "-" if count is None else f"{count:,}"
        print(
            f"| {r['tree']} | {r['world']} | {r['workload']} | {r['cpu_ms_per_workflow']:.3f} "
            f"| {r['statements_per_workflow']:.2f} | {shown} |"
        )


if __name__ == "__main__":
    main()
