"""Other workers' commit latency during 10,000-run bulk actions, against idle.

A bulk action must not stall the workers that share its world: it acts in
batches (one recorded step per 500 runs, short world operations over paced
chunks of runs), never in one long write transaction. This measures it on SQLite and on
PostgreSQL. For each world:

1. **an empty world**: a Worker (this process) runs a steady background
   workload, five one-step-each workflows at a time, each of three steps, for
   ``--seconds``; every ``commit``/``commit_many`` call it makes is timed (a
   ``WorldWrapper`` around its world);
2. **idle**: ``--n`` parked runs (each waits on a hook) are created in another
   world and checkpointed into its file, then the same background workload
   runs there for ``--seconds``, timed the same way: the world as it is just
   before a bulk action, with nothing acting on it;
3. **during**: with the background still running in that world, another
   process (``--bulk``: this script) runs each of ``--actions`` over the parked
   runs in turn, each action timed from its start until its process exits:
   ``cancel`` (``cancel_runs``), ``retry`` (``retry_runs`` of the cancelled
   runs, which are then cancelled again, untimed, so that they are closed) and
   ``prune`` (``prune_runs(query=...)``). The background's latencies are kept
   per action.

The ratios compare *during* with *idle*: the same workers on the same world,
which differ only in the bulk action. (Earlier reports compared with the empty
world, so a ratio also held what 10,000 more runs in the world cost every
commit; that ratio is still reported, as ``ratio_p99_to_an_empty_world``.)

Reported per world: the background's commit latency (p50, p95, p99, max, in
ms) idle and during each bulk action, their ratios, the background's commits
and polls for work (``lease`` calls) per second in both phases, the bulk
action's counts and duration, and the load average when measured. Writes
``benchmarks/results/bulk_actions.json``. Starts a throwaway PostgreSQL server
(``tests/pg_server.py``) unless ``--pg-url`` is given, or ``--worlds sqlite``
skips it.

Usage::

    python benchmarks/bulk_actions.py [--n 10000] [--seconds 10] [--worlds sqlite,postgres]
        [--repeat 3] [--actions cancel,retry,prune]

The machine's load moves between minutes, so with ``--repeat R`` each world is
measured R times, idle and bulk back to back each time (fresh worlds), and the
report gives every round's ratios and their medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import worlds  # noqa: E402
from workflow import (  # noqa: E402
    Worker,
    cancel_runs,
    create_hook,
    prune_runs,
    retry_runs,
    start,
    step,
    workflow,
)
from worlds.protocol import World  # noqa: E402
from worlds.types import CommitRequest, CommitResult, WorkItem  # noqa: E402
from worlds.wrapper import WorldWrapper  # noqa: E402

IN_FLIGHT = 5
CREATING = 32
"""Parked runs started at once while the bulk phase's world is filled (untimed)."""
QUERY = "batch = 'bench'"


@step
async def bench_tick(n: int) -> int:
    return n + 1


@workflow
async def bench_chain(n: int) -> int:
    for _ in range(3):
        n = await bench_tick(n)
    return n


@workflow
async def bench_parked(n: int) -> int:
    await create_hook()
    return n


class TimedWorld(WorldWrapper):
    """Times every commit the background worker makes, and counts its polls for work."""

    def __init__(self, inner: World) -> None:
        super().__init__(inner)
        self.latencies: list[float] = []
        self.leases = 0

    def reset(self) -> None:
        """Forget what was timed and counted so far."""
        self.latencies.clear()
        self.leases = 0

    async def lease(
        self, worker_id: str, *, names: Collection[str], limit: int, lease_seconds: float
    ) -> list[WorkItem]:
        self.leases += 1
        return await super().lease(worker_id, names=names, limit=limit, lease_seconds=lease_seconds)

    async def commit(self, request: CommitRequest) -> CommitResult:
        began = time.perf_counter()
        try:
            return await super().commit(request)
        finally:
            self.latencies.append(time.perf_counter() - began)

    async def commit_many(
        self, requests: Sequence[CommitRequest]
    ) -> list[CommitResult | Exception]:
        began = time.perf_counter()
        try:
            return await super().commit_many(requests)
        finally:
            self.latencies.append(time.perf_counter() - began)


async def _background(world: TimedWorld, until: anyio.Event) -> int:
    """Run chains ``IN_FLIGHT`` at a time until ``until``; the count finished."""
    finished = 0

    async def lane(lane_no: int) -> None:
        nonlocal finished
        n = 0
        while not until.is_set():
            run = await start(bench_chain, lane_no * 1_000_000 + n, world=world)
            await run.result(timeout=120)
            finished += 1
            n += 1

    async with Worker(world, [bench_chain]), anyio.create_task_group() as group:
        for lane_no in range(IN_FLIGHT):
            group.start_soon(lane, lane_no)
    return finished


def _stats(latencies: list[float], seconds: float, leases: int) -> dict[str, float]:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

    return {
        "commits": len(ordered),
        "commits_per_second": round(len(ordered) / seconds, 1),
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "max_ms": round(1000 * ordered[-1], 2),
        "mean_ms": round(1000 * statistics.fmean(ordered), 2),
        "leases_per_second": round(leases / seconds, 1),
    }


async def _empty_world(url: str, seconds: float) -> dict[str, float]:
    async with worlds.open(url) as inner:
        timed = TimedWorld(inner)
        stop = anyio.Event()
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            group.start_soon(_background, timed, stop)
            await anyio.sleep(seconds)
            stop.set()
        return _stats(timed.latencies, time.perf_counter() - began, timed.leases)


async def _during(url: str, n: int, seconds: float, actions: Sequence[str]) -> dict[str, Any]:
    async with worlds.open(url) as inner:
        await _park(inner, n)
        _checkpoint(url)
        timed = TimedWorld(inner)
        stop = anyio.Event()
        outcome: dict[str, Any] = {}

        async def bulk(action: str) -> tuple[dict[str, Any], list[float], int, float]:
            timed.reset()
            began = time.perf_counter()
            done = await anyio.run_process(
                [sys.executable, __file__, "--bulk", url, "--action", action],
                check=True,
                cwd=ROOT,
            )
            elapsed = time.perf_counter() - began
            counts = json.loads(done.stdout.decode().strip().splitlines()[-1])
            return counts, list(timed.latencies), timed.leases, elapsed

        async with anyio.create_task_group() as group:
            group.start_soon(_background, timed, stop)
            await anyio.sleep(1.0)  # the background is in its steady state first
            # idle: the same workers on the same world (its parked runs included), no bulk
            timed.reset()
            began = time.perf_counter()
            await anyio.sleep(seconds)
            idle_for = time.perf_counter() - began
            outcome["idle"] = _stats(list(timed.latencies), idle_for, timed.leases)
            for action in actions:
                if action == "prune" and "retry" in actions:
                    await bulk("cancel")  # the retried runs are open: close them, untimed
                counts, latencies, leases, elapsed = await bulk(action)
                background = _stats(latencies, elapsed, leases)
                outcome[action] = {"bulk": counts, "background": background}
            stop.set()
        return outcome


async def _park(world: World, n: int) -> None:
    """Start ``n`` parked runs, ``CREATING`` at a time (one at a time, 10,000 durable
    starts on PostgreSQL took minutes before the timing began)."""
    numbers = iter(range(n))

    async def creator() -> None:
        for k in numbers:
            await start(bench_parked, k, attributes={"batch": "bench"}, world=world)

    async with anyio.create_task_group() as group:
        for _ in range(CREATING):
            group.start_soon(creator)


def _checkpoint(url: str) -> None:
    """Copy an SQLite world's WAL back into its file: the timed phase does not pay for
    the checkpoints of the ``--n`` runs just created (the idle phase has none)."""
    if url.startswith("sqlite:///"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            db.close()


async def _bulk(url: str, action: str) -> None:
    async with worlds.open(url) as world:
        began = time.perf_counter()
        if action == "cancel":
            result = await cancel_runs(QUERY, grace=None, world=world)
        elif action == "retry":
            result = await retry_runs(QUERY, world=world)
        else:
            result = await prune_runs(query=QUERY, world=world)
        elapsed = time.perf_counter() - began
    print(
        json.dumps(
            {
                "matched": result.matched,
                "done": result.done,
                "failed": result.failed,
                "seconds": round(elapsed, 2),
                "runs_per_second": round(result.done / elapsed, 1),
            }
        )
    )


def measure(
    url_empty: str, url_during: str, n: int, seconds: float, actions: Sequence[str]
) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    empty = anyio.run(_empty_world, url_empty, seconds)
    during = anyio.run(_during, url_during, n, seconds, actions)
    idle = during.pop("idle")
    per_action = {}
    for action, found in during.items():
        background = found["background"]
        per_action[action] = {
            "background": background,
            "bulk": found["bulk"],
            "ratio_p50": round(background["p50_ms"] / idle["p50_ms"], 2),
            "ratio_p99": round(background["p99_ms"] / idle["p99_ms"], 2),
            "ratio_commits_per_second": round(
                background["commits_per_second"] / idle["commits_per_second"], 2
            ),
            "ratio_p99_to_an_empty_world": round(background["p99_ms"] / empty["p99_ms"], 2),
        }
    first = per_action[actions[0]]
    return {
        "idle": idle,
        "idle_empty_world": empty,
        # the first action's figures under the names earlier reports used
        "during_bulk_cancel": first["background"],
        "bulk_cancel": first["bulk"],
        "ratio_p50": first["ratio_p50"],
        "ratio_p99": first["ratio_p99"],
        "ratio_commits_per_second": first["ratio_commits_per_second"],
        "actions": per_action,
        "load_average_1m_before": round(load_before, 2),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def _round_urls(kind: str, idle: str, bulk: str, round_no: int) -> tuple[str, str]:
    """The worlds of round ``round_no``: fresh ones each round (a file or a schema)."""
    if round_no == 0:
        return idle, bulk
    if kind == "sqlite":
        return idle.replace(".db", f"{round_no}.db"), bulk.replace(".db", f"{round_no}.db")
    return f"{idle}_{round_no}", f"{bulk}_{round_no}"


def _summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round's figures, each round's ratios and load, and the medians."""
    ratios = [r["ratio_p99"] for r in rounds]
    middle = sorted(range(len(rounds)), key=lambda i: ratios[i])[len(rounds) // 2]
    return {
        **rounds[middle],
        "rounds": [
            {
                k: r[k]
                for k in (
                    "ratio_p50",
                    "ratio_p99",
                    "ratio_commits_per_second",
                    "load_average_1m_before",
                    "load_average_1m",
                )
            }
            | {
                "idle_p99_ms": r["idle"]["p99_ms"],
                "idle_empty_world_p99_ms": r["idle_empty_world"]["p99_ms"],
                "bulk_p99_ms": r["during_bulk_cancel"]["p99_ms"],
                "ratio_p99_by_action": {a: v["ratio_p99"] for a, v in r["actions"].items()},
                "runs_per_second_by_action": {
                    a: v["bulk"]["runs_per_second"] for a, v in r["actions"].items()
                },
            }
            for r in rounds
        ],
        "median_ratio_p99": statistics.median(ratios),
        "median_ratio_p50": statistics.median(r["ratio_p50"] for r in rounds),
        "median_ratio_p99_by_action": {
            action: statistics.median(r["actions"][action]["ratio_p99"] for r in rounds)
            for action in rounds[0]["actions"]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="runs the bulk action cancels")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each idle phase")
    parser.add_argument("--worlds", default="sqlite,postgres", help="which worlds")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of idle + bulk")
    parser.add_argument("--pg-url", help="a PostgreSQL URL (default: start a server)")
    parser.add_argument(
        "--actions", default="cancel,retry,prune", help="bulk actions, in this order"
    )
    parser.add_argument("--action", default="cancel", help=argparse.SUPPRESS)  # of --bulk
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/bulk_actions.json"))
    parser.add_argument("--bulk", metavar="URL", help=argparse.SUPPRESS)  # the bulk process
    args = parser.parse_args()
    if args.bulk:
        anyio.run(_bulk, args.bulk, args.action)
        return
    chosen = [w for w in args.worlds.split(",") if w]
    actions = [a for a in args.actions.split(",") if a]
    unknown = set(actions) - {"cancel", "retry", "prune"}
    if not actions or unknown or ("retry" in actions and "cancel" not in actions):
        parser.error("--actions: cancel, retry and prune (a retry needs a cancel before it)")
    results: dict[str, Any] = {"n": args.n, "cpu_count": os.cpu_count(), "actions": actions}
    scratch = Path(tempfile.mkdtemp(prefix="wf-bulk-bench-"))
    directory = None
    try:
        urls: dict[str, tuple[str, str]] = {}
        if "sqlite" in chosen:
            urls["sqlite"] = (
                f"sqlite:///{scratch / 'idle.db'}",
                f"sqlite:///{scratch / 'bulk.db'}",
            )
        if "postgres" in chosen:
            from tests import pg_server

            if args.pg_url:
                base = args.pg_url
            else:
                directory = tempfile.mkdtemp(prefix="wf-pg-bench-")
                base = pg_server.start(directory, durable=True).socket_url
            sep = "&" if "?" in base else "?"
            urls["postgres"] = (f"{base}{sep}schema=bench_idle", f"{base}{sep}schema=bench_bulk")
        for kind, (idle_url, bulk_url) in urls.items():
            rounds = []
            for round_no in range(args.repeat):
                idle_r, bulk_r = _round_urls(kind, idle_url, bulk_url, round_no)
                rounds.append(measure(idle_r, bulk_r, args.n, args.seconds, actions))
                print(json.dumps({kind: rounds[-1]}), file=sys.stderr)
            results[kind] = _summary(rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if directory is not None:
            from tests import pg_server

            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
