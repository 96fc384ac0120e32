"""Idle cost: the statements an idle worker sends its world, per second.

A worker runs a workflow and a step, has 100 hourly schedules that are not
due, and nothing to do. After a warm-up, every statement it issues for
``--seconds`` (default 30) is counted:

* SQLite: each statement any connection of this process executes
  (``sqlite3.Connection.set_trace_callback`` on every connection the world
  opens), ``BEGIN`` and ``COMMIT`` included;
* PostgreSQL: each round trip to the server (``tests/pg_round_trips.py``, a
  proxy counting the server's ``ReadyForQuery``), on a server this script
  starts (``tests/pg_server.py``) unless ``--pg-url`` names one;
* memory (which sends no statements): the world calls that may query it, every
  call but ``wait``, ``wait_idle`` and ``now`` (``tests/world_calls.py``).

On every world the worker's world calls are counted too (``world_calls``, by
method, and ``queries_per_second``: the calls that may query).

The budget (``rfcs/0018``) is at most one statement a second per idle worker
on each world, heartbeats included (a worker heartbeat, one statement per
interval, counts here when it exists). Prints one JSON object; ``--out``
writes it too.

Usage::

    python benchmarks/idle_cost.py [--seconds 30] [--worlds memory sqlite postgres] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import worlds  # noqa: E402
from benchmarks.sqlite_statements import SqliteStatements  # noqa: E402
from tests.world_calls import CountedWorld  # noqa: E402
from workflow import Worker, step, workflow  # noqa: E402
from workflow.schedules import create_schedule  # noqa: E402

WARM_UP = 3.0
"""Seconds after the worker starts before counting: its first leases and subscriptions."""


@step
async def nothing(n: int) -> int:
    return n


@workflow
async def idle_flow(n: int) -> int:
    return await nothing(n)


async def _idle(
    world: worlds.World,
    seconds: float,
    counter: Callable[[], int] | None = None,
    texts: dict[str, int] | None = None,
) -> dict[str, Any]:
    for n in range(100):
        await create_schedule(idle_flow, n, id=f"idle-{n:03d}", cron="0 * * * *", world=world)
    calls = CountedWorld(world)
    counter = counter or calls.queries
    async with Worker(calls, [idle_flow, nothing]):
        await anyio.sleep(WARM_UP)
        before, began, queries = counter(), time.perf_counter(), calls.queries()
        seen, called = dict(texts or {}), dict(calls.calls)
        cpu0 = time.process_time()
        await anyio.sleep(seconds)
        counted, elapsed = counter() - before, time.perf_counter() - began
        cpu = time.process_time() - cpu0
        queried = calls.queries() - queries
        sent = {text: n - seen.get(text, 0) for text, n in (texts or {}).items()}
        by_method = {name: n - called.get(name, 0) for name, n in calls.calls.items()}
    result: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "statements": counted,
        "statements_per_second": round(counted / elapsed, 3),
        "queries_per_second": round(queried / elapsed, 3),
        "world_calls": dict(sorted((m, n) for m, n in by_method.items() if n)),
        "cpu_percent": round(100 * cpu / elapsed, 2),
    }
    if texts is not None:  # what the idle worker sent, by statement
        result["by_statement"] = dict(
            sorted(((t, n) for t, n in sent.items() if n), key=lambda kv: -kv[1])
        )
    return result


async def memory_idle(seconds: float) -> dict[str, Any]:
    """The memory world: its "statements" are the world calls that may query it."""
    async with worlds.open("memory://") as world:
        return await _idle(world, seconds)


async def sqlite_idle(seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, SqliteStatements(by_text=True) as statements:
        async with worlds.open(f"sqlite:///{tmp}/idle.db") as world:
            result = await _idle(world, seconds, lambda: statements.count, statements.texts)
    return result


async def postgres_idle(url: str, seconds: float) -> dict[str, Any]:
    from tests.pg_round_trips import RoundTripProxy, server_address

    host, port = server_address(url)
    async with RoundTripProxy(host, port) as proxy, worlds.open(proxy.url()) as world:
        return await _idle(world, seconds, lambda: proxy.round_trips)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--worlds", nargs="+", default=["memory", "sqlite", "postgres"])
    parser.add_argument("--pg-url", help="a PostgreSQL server (default: start one)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result: dict[str, Any] = {
        "budget_statements_per_second": 1.0,
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    if "memory" in args.worlds:
        result["memory"] = await memory_idle(args.seconds)
    if "sqlite" in args.worlds:
        result["sqlite"] = await sqlite_idle(args.seconds)
    if "postgres" in args.worlds:
        from tests import pg_server

        directory = None
        url = args.pg_url
        if url is None:
            directory = tempfile.mkdtemp(prefix="wf-pg-idle-")
            url = pg_server.start(directory).url
        try:
            result["postgres"] = await postgres_idle(url, args.seconds)
        finally:
            if directory is not None:
                pg_server.stop(directory)
                shutil.rmtree(directory, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    anyio.run(main)
