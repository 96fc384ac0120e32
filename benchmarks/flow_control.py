"""Flow control cost: limited pairs under load, promotion latency, tombstone size.

1. Throughput: ``--runs`` runs (default 20,000) spread over ``--pairs`` pairs
   (default 1,000), each started with ``tenant=Limited(v, 3)``, all at once,
   then drained by one in-process Worker; the same workload without limits
   runs on a fresh world in the same process. Reports runs/s of both and the
   ratio (the goal is >= 0.8), and checks every run completed.
2. Promotion latency: one pair ``Limited("p", 1)`` with a queue of L waiting
   runs, for each L in ``--queues``; each sample closes the holder
   (``cancel_run``: the world releases the slot and promotes the first waiter
   in that operation) and leases the promoted run's workflow item. Reports the
   median and p95 of that time per L: flat means promotion is indexed.
3. Tombstones: ``--tombstones`` runs each holding one unique pair, closed and
   pruned (claims kept); reports the bytes the claims table takes per row
   (SQLite: ``dbstat`` pages; PostgreSQL: ``pg_total_relation_size``).
4. Fairness under skew (key limits, ``set_key_limit``): key limit 10, one value
   with ``--skew`` waiting runs (default 5,000, started first) and nine values
   with 10 each, every pair ``Limited(v, 10)``; holders are closed one at a time
   and the admissions counted until the nine values' 90 runs were all admitted.
   Weighted round-robin over 10 values admits them within about 100 admissions
   (their fair share); first in first out would need ``--skew`` + 90.
5. Throughput with a key limit: part 1's limited workload again with
   ``set_key_limit("tenant", --key-limit)`` (default 64, the worker's
   concurrency); the ratio to part 1's limited run (goal >= 0.8).

6. Promotion latency at a limited key: ``set_key_limit("tenant", 1)`` with V
   values waiting (3 runs each, ``Limited(v, 3)``) for each V in
   ``--key-values``; each sample commits the holder's completion (the world
   frees the key slot and promotes the key's next value, weighted round-robin,
   in that transaction) and leases the promoted run: p50 and p99 of that time
   per V. Flat means the key's line is read at its head, not value by value.

7. Admission accuracy of a rate limit: 200 starts of one pair at
   ``RateLimited("v", 20, per=0.5)`` while a Worker (concurrency 32) runs them;
   from the logs, the most admissions (``RunCreated``'s ``start_at``, else its
   time), the most ``RunStarted`` (recorded at the admission) and the most first
   tasks committed (when workers really began runs) in any 0.5 s window, against 20.

``--parts`` picks parts (``throughput,promotion,tombstones,fairness,keyed,
key_promotion,rates``); the machine's load average is recorded before and after.
Runs on SQLite by default; ``--world postgresql://...`` runs it there too
(a fresh schema per part). Prints one JSON object; ``--out`` writes it.

Usage::

    python benchmarks/flow_control.py [--runs 20000 --pairs 1000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

import worlds
from workflow import (
    Limited,
    RateLimited,
    Unique,
    Worker,
    get_run,
    set_key_limit,
    start,
    step,
    workflow,
)
from worlds.events import RunCreated, RunStarted
from worlds.types import CommitRequest, CreateRunRequest, Limit, RunCompleted


@step
async def work_step(n: int) -> int:
    return n + 1


@workflow
async def limited_job(n: int) -> int:
    return await work_step(n)


async def throughput(
    url: str, runs: int, pairs: int, limited: bool, key_limit: int | None = None
) -> dict[str, Any]:
    """Start ``runs`` runs at once (in batches of concurrent starts), drain them, time it."""
    async with worlds.open(url) as world:
        if key_limit is not None:
            await set_key_limit("tenant", key_limit, world=world)
        began = time.perf_counter()
        ids: list[str] = []

        async def one(n: int) -> None:
            value = f"t-{n % pairs}"
            tenant: Any = Limited(value, 3) if limited else value
            run = await start(limited_job, n, attributes={"tenant": tenant}, world=world)
            ids.append(run.id)

        async with Worker(world, [limited_job], concurrency=64, poll_interval=0.05):
            batch = 200
            for first in range(0, runs, batch):
                async with anyio.create_task_group() as group:
                    for n in range(first, min(first + batch, runs)):
                        group.start_soon(one, n)
            started = time.perf_counter() - began
            for run_id in ids:
                await get_run(run_id, world=world).result(timeout=600)
        seconds = time.perf_counter() - began
        left = 0
        for n in range(pairs):
            left += len(await world.list_slots("tenant", f"t-{n}"))
        assert left == 0, f"{left} slot rows left after every run completed"
        return {
            "runs": len(ids),
            "start_seconds": round(started, 1),
            "seconds": round(seconds, 1),
            "runs_per_second": round(len(ids) / seconds, 1),
        }


async def promotion(url: str, queue: int, samples: int) -> dict[str, float]:
    """Time closing a holder of a pair with ``queue`` waiters until the next is leased."""
    async with worlds.open(url) as world:
        name = f"promo-{uuid.uuid4().hex[:8]}"
        key = f"p-{queue}"

        async def create() -> str:
            run_id = uuid.uuid4().hex
            request = CreateRunRequest(
                run_id=run_id,
                workflow=name,
                args=b"",
                attributes={key: "v"},
                limits={key: Limit(limit=1)},
            )
            created = await world.create_run(request)
            assert created.run is not None
            return run_id

        batch = 200
        for first in range(0, queue + samples + 1, batch):
            async with anyio.create_task_group() as group:
                for _ in range(first, min(first + batch, queue + samples + 1)):
                    group.start_soon(create)
        (item,) = await world.lease("bench", names={name}, limit=10, lease_seconds=60)
        holder = item.run_id
        times = []
        for _ in range(samples):
            began = time.perf_counter()
            await world.cancel_run(holder, "bench")
            leased = await world.lease("bench", names={name}, limit=10, lease_seconds=60)
            times.append((time.perf_counter() - began) * 1000)
            assert len(leased) == 1, leased
            holder = leased[0].run_id
        times.sort()
        return {
            "median_ms": round(statistics.median(times), 3),
            "p95_ms": round(times[int(0.95 * len(times)) - 1], 3),
            "p50_ms": _quantile(times, 0.5),
            "p99_ms": _quantile(times, 0.99),
        }


async def _tenant_run(world: worlds.World, name: str, value: str, limit: int) -> str:
    """Create a run of workflow ``name`` holding ``tenant=Limited(value, limit)``; its id."""
    request = CreateRunRequest(
        run_id=uuid.uuid4().hex,
        workflow=name,
        args=b"",
        attributes={"tenant": value},
        limits={"tenant": Limit(limit=limit)},
    )
    created = await world.create_run(request)
    assert created.run is not None
    return request.run_id


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``ordered`` (nearest rank)."""
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 3)


async def key_promotion(url: str, values: int, per_value: int, samples: int) -> dict[str, Any]:
    """Promotion latency at a limited key: ``values`` values with ``per_value`` waiting
    runs each (``Limited(v, 3)``) under ``set_key_limit(key, 1)``; each sample closes
    the key's holder (``commit`` of its completion: the world frees the slot and
    promotes the key's next value in that transaction) and leases the run promoted.
    The time from the close's call to the lease's return, p50 and p99."""
    async with worlds.open(url) as world:
        name = f"kp-{uuid.uuid4().hex[:8]}"
        await world.set_key_limit("tenant", 1)

        async def create(value: str) -> None:
            await _tenant_run(world, name, value, 3)

        starts = [f"v-{n % values}" for n in range(max(values * per_value, samples + 1))]
        batch = 50
        for first in range(0, len(starts), batch):
            async with anyio.create_task_group() as group:
                for value in starts[first : first + batch]:
                    group.start_soon(create, value)
        (item,) = await world.lease("bench", names={name}, limit=10, lease_seconds=60)
        holder = item.run_id
        times: list[float] = []
        for _ in range(samples):
            began = time.perf_counter()
            done = RunCompleted(result=b"")
            closed = await world.commit(
                CommitRequest(run_id=holder, worker_id="bench", events=(done,))
            )
            assert closed.ok
            leased = await world.lease("bench", names={name}, limit=10, lease_seconds=60)
            times.append((time.perf_counter() - began) * 1000)
            assert len(leased) == 1, leased  # the key admits one at a time
            holder = leased[0].run_id
        times.sort()
        return {
            "values_waiting": values,
            "runs_waiting": len(starts) - 1,
            "key_limit": 1,
            "samples": samples,
            "p50_ms": _quantile(times, 0.5),
            "p99_ms": _quantile(times, 0.99),
        }


def _most_in_window(times: list[datetime], per: float) -> int:
    """The most of ``times`` in any half-open window ``[t, t + per)``."""
    ordered = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(ordered):
        while (at - ordered[first]).total_seconds() >= per:
            first += 1
        most = max(most, last - first + 1)
    return most


async def rate_accuracy(url: str, starts: int, limit: int, per: float) -> dict[str, Any]:
    """``starts`` starts of one pair at ``RateLimited(v, limit, per)`` while a Worker
    runs them; the most admissions (``RunCreated``: its ``start_at``, else its time),
    the most ``RunStarted`` (a rate-limited run's is its admission) and the most
    first tasks workers committed (the event after ``RunStarted``) in any window of
    ``per`` seconds, from the logs."""
    async with worlds.open(url) as world:
        began = time.perf_counter()
        ids: list[str] = []

        async def one(n: int) -> None:
            rated = RateLimited("v", limit, per=per)
            run = await start(limited_job, n, attributes={"customer": rated}, world=world)
            ids.append(run.id)

        async with Worker(world, [limited_job], concurrency=32, poll_interval=0.05):
            async with anyio.create_task_group() as group:
                for n in range(starts):
                    group.start_soon(one, n)
            for run_id in ids:
                await get_run(run_id, world=world).result(timeout=600)
        seconds = time.perf_counter() - began
        admitted: list[datetime] = []
        started: list[datetime] = []
        begun: list[datetime] = []
        for run_id in ids:
            log = await world.read_events(run_id)
            for n, event in enumerate(log):
                if isinstance(event, RunCreated):
                    admitted.append(event.start_at or event.at)
                elif isinstance(event, RunStarted):
                    started.append(event.at)
                    begun.append(log[n + 1].at)
        span = (max(admitted) - min(admitted)).total_seconds()
        return {
            "starts": len(ids),
            "limit": limit,
            "per_seconds": per,
            "most_admissions_in_a_window": _most_in_window(admitted, per),
            "most_run_started_in_a_window": _most_in_window(started, per),
            "most_first_tasks_committed_in_a_window": _most_in_window(begun, per),
            "admission_span_seconds": round(span, 2),
            "ideal_span_seconds": round(per * (starts / limit - 1), 2),
            "seconds": round(seconds, 1),
        }


async def tombstones(url: str, count: int) -> dict[str, Any]:
    """Bytes per claims row once ``count`` unique holders were closed and pruned."""
    async with worlds.open(url) as world:
        batch = 200
        for first in range(0, count, batch):
            async with anyio.create_task_group() as group:
                for n in range(first, min(first + batch, count)):
                    group.start_soon(_closed_holder, world, n)
        pruned = 0
        cutoff = datetime.now(UTC) + timedelta(seconds=1)
        while True:
            ids = await world.prune_runs(cutoff, 1000)
            pruned += len(ids)
            if not ids:
                break
        tombstone = await world.find_claim("order", "o-0")
        assert tombstone is not None and tombstone.pruned_status is not None
        size = await _claims_bytes(world)
        return {"pruned": pruned, "claims_bytes": size, "bytes_per_tombstone": round(size / count)}


async def _closed_holder(world: worlds.World, n: int) -> None:
    run = await start(limited_job, n, attributes={"order": Unique(f"o-{n}")}, world=world)
    await world.cancel_run(run.id, None)


async def _claims_bytes(world: worlds.World) -> int:
    path = getattr(world, "path", None)
    if isinstance(path, str):
        db = sqlite3.connect(path)
        try:
            rows = db.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name IN "
                "('claims', 'claims_run', 'claims_lapsing')"
            ).fetchone()
        finally:
            db.close()
        return int(rows[0])
    import asyncpg  # only for the PostgreSQL figure

    schema = getattr(world, "schema", "public")
    conn = await asyncpg.connect(_base_url(world.url))
    try:
        size = await conn.fetchval(
            "SELECT pg_total_relation_size(format('%I.claims', $1::text)::regclass)", schema
        )
    finally:
        await conn.close()
    return int(size)


async def fairness(url: str, skew: int) -> dict[str, Any]:
    """Admissions until nine small values' runs all got a key slot, one big value ahead."""
    async with worlds.open(url) as world:
        name = f"fair-{uuid.uuid4().hex[:8]}"
        await world.set_key_limit("tenant", 10)
        value_of: dict[str, str] = {}

        async def create(value: str) -> None:
            value_of[await _tenant_run(world, name, value, 10)] = value

        values = ["big"] * skew + [f"small-{n}" for n in range(9) for _ in range(10)]
        batch = 200
        for first in range(0, len(values), batch):
            async with anyio.create_task_group() as group:
                for value in values[first : first + batch]:
                    group.start_soon(create, value)
        admitted: list[str] = []
        holding = [
            i.run_id for i in await world.lease("bench", names={name}, limit=20, lease_seconds=60)
        ]
        admitted += [value_of[r] for r in holding]
        began = time.perf_counter()
        while sum(v != "big" for v in admitted) < 90:
            done = RunCompleted(result=b"")
            closed = await world.commit(
                CommitRequest(run_id=holding.pop(0), worker_id="bench", events=(done,))
            )
            assert closed.ok
            new = [
                i.run_id
                for i in await world.lease("bench", names={name}, limit=20, lease_seconds=60)
            ]
            admitted += [value_of[r] for r in new]
            holding += new
        seconds = time.perf_counter() - began
        big_before = sum(v == "big" for v in admitted)
        return {
            "waiting_big": skew,
            "waiting_small": 90,
            "key_limit": 10,
            "admissions_until_small_done": len(admitted),
            "big_admitted_meanwhile": big_before,
            "fifo_would_need": skew + 90,
            "fair_share_ideal": 100,
            "close_and_promote_ms": round(seconds * 1000 / max(len(admitted) - 10, 1), 3),
        }


def _base_url(url: str) -> str:
    return url.split("?", 1)[0]


def _each_url(base: str | None, tmp: str) -> Callable[[str], str]:
    """A fresh world URL per part: an SQLite file, or a new PostgreSQL schema."""

    def make(part: str) -> str:
        if base is None:
            return f"sqlite:///{tmp}/{part}.db"
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}schema=bench_{part}_{uuid.uuid4().hex[:6]}"

    return make


def _load() -> list[float]:
    """The machine's load averages (1, 5, 15 minutes): the figures' context."""
    with open("/proc/loadavg") as file:
        return [float(part) for part in file.read().split()[:3]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=1_000)
    parser.add_argument("--queues", type=str, default="10,100,1000,5000")
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--tombstones", type=int, default=5_000)
    parser.add_argument("--skew", type=int, default=5_000)
    parser.add_argument("--key-limit", type=int, default=64)
    parser.add_argument("--key-values", type=str, default="10,100,1000")
    parser.add_argument(
        "--parts",
        type=str,
        default="throughput,promotion,tombstones,fairness,keyed,key_promotion,rates",
        help="which parts to run (comma-separated)",
    )
    parser.add_argument("--world", type=str, default=None, help="a postgresql:// URL")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    report: dict[str, Any] = {
        "world": "sqlite" if args.world is None else "postgresql",
        "pairs": args.pairs,
        "limit": 3,
        "load_average": _load(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = _each_url(args.world, tmp)
        limited: dict[str, Any] | None = None
        if parts & {"throughput", "keyed"}:
            limited = anyio.run(throughput, url("limited"), args.runs, args.pairs, True)
            report["with_limits"] = limited
        if "throughput" in parts and limited is not None:
            plain = anyio.run(throughput, url("plain"), args.runs, args.pairs, False)
            report["without_limits"] = plain
            report["throughput_ratio"] = round(
                limited["runs_per_second"] / plain["runs_per_second"], 2
            )
        if "promotion" in parts:
            report["promotion_latency_by_queue_length"] = {
                q: anyio.run(promotion, url(f"promotion{q}"), int(q), args.samples)
                for q in args.queues.split(",")
            }
        if "tombstones" in parts:
            report["tombstones"] = anyio.run(tombstones, url("tombstones"), args.tombstones)
        if "fairness" in parts:
            report["fairness_under_skew"] = anyio.run(fairness, url("fairness"), args.skew)
        if "keyed" in parts and limited is not None:
            keyed = anyio.run(throughput, url("keyed"), args.runs, args.pairs, True, args.key_limit)
            report["with_key_limit"] = {**keyed, "key_limit": args.key_limit}
            report["key_limit_throughput_ratio"] = round(
                keyed["runs_per_second"] / limited["runs_per_second"], 2
            )
        if "rates" in parts:
            report["rate_limit_admission_accuracy"] = anyio.run(
                rate_accuracy, url("rates"), 200, 20, 0.5
            )
        if "key_promotion" in parts:
            report["key_promotion_latency_by_values_waiting"] = {
                v: anyio.run(key_promotion, url(f"keyprom{v}"), int(v), 3, args.samples)
                for v in args.key_values.split(",")
            }
    report["load_average_after"] = _load()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
