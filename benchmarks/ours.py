"""Our runtime on the same workloads as ``dbos_peer.py``, with the same output.

A worker and the client share one process and one world, as DBOS runs its
workflows in the process that starts them. Over the timed part it also counts
this process's CPU time (``time.process_time``: every thread, SQLite's
included) and, on SQLite, the statements sent (``sqlite_statements.py``), per
workflow. Prints one JSON line on stdout.

Usage::

    python benchmarks/ours.py WORKLOAD [--n N] [--concurrency C] [--world URL] [--uvloop]

``--uvloop`` runs the process on uvloop's event loop (the ``uvloop`` extra)
instead of asyncio's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import worlds
from benchmarks.sqlite_statements import SqliteStatements
from workflow import Worker, start, step, workflow

WORKLOADS: dict[str, tuple[int, int]] = {  # name: (default N, steps per workflow)
    "one_step_sequential": (300, 1),
    "one_step_concurrent": (1000, 1),
    "steps_10": (20, 10),
    "steps_1000": (1, 1000),
}


@step
async def add_one(x: int) -> int:
    return x + 1


@workflow
async def one_step(x: int) -> int:
    return await add_one(x)


@workflow
async def many_steps(count: int) -> int:
    x = 0
    for _ in range(count):
        x = await add_one(x)
    return x


async def measure(
    workload: str, n: int, concurrency: int, url: str, statements: SqliteStatements
) -> dict[str, Any]:
    steps = WORKLOADS[workload][1]
    world = worlds.open(url)
    async with world, Worker(world, [one_step, many_steps], concurrency=max(64, concurrency * 2)):

        async def once(i: int) -> None:
            if steps == 1:
                run = await start(one_step, i, world=world)
                assert await run.result() == i + 1
            else:
                run2 = await start(many_steps, steps, world=world)
                assert await run2.result() == steps

        for i in range(5):
            await once(i)
        began, cpu, sent = time.perf_counter(), time.process_time(), statements.count
        if workload == "one_step_concurrent":
            limit = asyncio.Semaphore(concurrency)

            async def bounded(i: int) -> None:
                async with limit:
                    await once(i)

            await asyncio.gather(*(bounded(i) for i in range(n)))
        else:
            for i in range(n):
                await once(i)
        seconds = time.perf_counter() - began
        cpu, sent = time.process_time() - cpu, statements.count - sent
    return {
        "peer": "ours",
        "version": version("attribute-workflows"),
        "workload": workload,
        "n": n,
        "concurrency": concurrency if workload == "one_step_concurrent" else 1,
        "seconds": round(seconds, 4),
        "workflows_per_second": round(n / seconds, 3),
        "seconds_per_step": round(seconds / (n * steps), 6) if steps > 1 else None,
        "cpu_ms_per_workflow": round(1000 * cpu / n, 4),
        "statements_per_workflow": round(sent / n, 3) if url.startswith("sqlite") else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("--n", type=int)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--world", help="world URL (default: a fresh SQLite file)")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop's event loop")
    args = parser.parse_args()
    n = args.n or WORKLOADS[args.workload][0]
    with tempfile.TemporaryDirectory() as tmp:
        url = args.world or f"sqlite:///{tmp}/bench.db"
        options = {"use_uvloop": True} if args.uvloop else {}
        with SqliteStatements() as statements:
            result = anyio.run(
                measure,
                args.workload,
                n,
                args.concurrency,
                url,
                statements,
                backend_options=options,
            )
        result["event_loop"] = "uvloop" if args.uvloop else "asyncio"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
