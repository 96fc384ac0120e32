"""Do long transaction steps hold up other runs' commits on PostgreSQL?

Two workers on one PostgreSQL world (two ``World`` objects, two pools, one
process): the *holder* runs ``@transaction`` steps that update a hot row of
the application's table and then sleep ``--hold`` seconds (1 s) inside the
transaction, so its run's and work item's rows (and the hot row) stay locked
that long, back to back (``--holders`` at a time, so some lock is held
throughout the measurement). The *other* worker runs ``--n`` ordinary
two-step workflows (``C`` in flight); every ``commit`` / ``commit_many`` it
makes is timed through a ``WorldWrapper``. The same workload runs first with
no holder (``idle``), then while the holder holds its locks (``held``); the
report gives each phase's commit latency p50/p99/max, the commits slower than
the hold itself (a commit that waited for a holder's lock takes at least
that long) and the holder transactions that committed during the phase.

Usage::

    python benchmarks/transaction_locks.py [--n 300] [--concurrency 8] [--hold 1.0]
        [--holders 2] [--pg-url URL]

Writes ``benchmarks/results/transaction_locks.json``. Latencies on a loaded
machine are noise; the figure to read is held against idle, and the count of
commits that waited a whole hold (zero if nothing blocks on the holder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import worlds  # noqa: E402
from benchmarks.bulk_actions import TimedWorld  # noqa: E402
from benchmarks.transactions import pg_execute, with_database  # noqa: E402
from workflow import Worker, get_transaction, start, step, transaction, workflow  # noqa: E402

HOLD = {"seconds": 1.0}
"""How long a holder's transaction sleeps with its locks held (``--hold``)."""


@transaction(name="locks_hold")
async def hold() -> int:
    tx = get_transaction()
    await tx.execute("UPDATE hot SET n = n + 1 WHERE id = 1")
    await asyncio.sleep(HOLD["seconds"])  # the run's, the item's and the hot row's locks held
    return int((await tx.execute("SELECT n FROM hot WHERE id = 1"))[0][0])


@workflow(name="locks_holder")
async def holder() -> int:
    return await hold()


@step(name="locks_touch")
async def touch(n: int) -> int:
    return n + 1


@workflow(name="locks_plain")
async def plain(n: int) -> int:
    return await touch(await touch(n))


async def _phase(world: TimedWorld, n: int, concurrency: int) -> list[float]:
    """Drive ``n`` plain workflows (``concurrency`` in flight); the commit latencies."""
    world.latencies.clear()
    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with semaphore:
            run = await start(plain, i, world=world)
            assert await run.result(timeout=300) == i + 2

    await asyncio.gather(*(one(i) for i in range(n)))
    return list(world.latencies)


def _summary(latencies: list[float], hold: float) -> dict[str, Any]:
    ordered = sorted(latencies)
    centiles = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "commits": len(ordered),
        "p50_ms": round(centiles[49] * 1000, 2),
        "p99_ms": round(centiles[98] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "slower_than_hold": sum(1 for x in ordered if x >= hold),
    }


async def measure(url: str, n: int, concurrency: int, holders: int) -> dict[str, Any]:
    """Both phases on the world at ``url``."""
    hold_world = worlds.open(url)
    timed = TimedWorld(worlds.open(url))
    async with hold_world, timed:
        await hold_world.migrate()
        import asyncpg

        conn = await asyncpg.connect(
            hold_world.dsn,  # type: ignore[attr-defined]
            server_settings={"search_path": hold_world.schema},  # type: ignore[attr-defined]
        )
        try:
            await conn.execute("CREATE TABLE hot (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)")
            await conn.execute("INSERT INTO hot VALUES (1, 0)")
        finally:
            await conn.close()
        async with Worker(timed, [plain], concurrency=concurrency):
            await _phase(timed, 20, concurrency)  # warm-up: pools, caches
            idle = await _phase(timed, n, concurrency)
            async with Worker(hold_world, [holder], concurrency=holders):
                stop = asyncio.Event()
                committed = 0

                async def keep_holding() -> None:
                    nonlocal committed
                    while not stop.is_set():
                        run = await start(holder, world=hold_world)
                        await run.result(timeout=300)
                        committed += 1

                tasks = [asyncio.create_task(keep_holding()) for _ in range(holders)]
                await asyncio.sleep(HOLD["seconds"] / 2)  # the first locks are taken
                began_holding = committed
                held = await _phase(timed, n, concurrency)
                during = committed - began_holding
                stop.set()
                await asyncio.gather(*tasks)
    return {
        "idle": _summary(idle, HOLD["seconds"]),
        "held": _summary(held, HOLD["seconds"]),
        "holder_transactions_during_phase": during,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--hold", type=float, default=1.0)
    parser.add_argument("--holders", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pg-url", default=None)
    args = parser.parse_args()
    HOLD["seconds"] = args.hold

    from tests import pg_server

    directory = None
    server = args.pg_url
    try:
        if server is None:
            directory = tempfile.mkdtemp(prefix="tx-locks-pg-")
            server = pg_server.start(directory).socket_url
        report: dict[str, Any] = {
            "n": args.n,
            "concurrency": args.concurrency,
            "hold_seconds": args.hold,
            "holders": args.holders,
            "load_before": os.getloadavg()[0],
            "runs": [],
        }
        for _ in range(args.repeat):
            name = f"locks_{uuid.uuid4().hex[:8]}"
            pg_execute(server, f'CREATE DATABASE "{name}"')
            try:
                url = with_database(server, name)
                result = asyncio.run(measure(url, args.n, args.concurrency, args.holders))
            finally:
                pg_execute(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            report["runs"].append(result)
            print(json.dumps(result))
        for phase in ("idle", "held"):
            for key in ("p50_ms", "p99_ms"):
                report[f"{phase}_{key}_median"] = statistics.median(
                    r[phase][key] for r in report["runs"]
                )
        report["load_after"] = os.getloadavg()[0]
        print(
            f"commit latency p50/p99: idle {report['idle_p50_ms_median']}/"
            f"{report['idle_p99_ms_median']} ms, held {report['held_p50_ms_median']}/"
            f"{report['held_p99_ms_median']} ms"
        )
        out = ROOT / "benchmarks" / "results" / "transaction_locks.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
    finally:
        if directory is not None:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
