"""Attribute search and claim cost on the SQLite world.

1. Fills a fresh SQLite world with N runs (default 100,000), each with a
   ``tenant`` (100 values), a ``customer`` (5,000 values) and a unique
   ``order``, then times ``list_runs(attributes=...)`` pages and ``find_run``.
2. Times ``start`` with no attributes, with one ``Unique`` pair, and with an
   ``idempotency_key``, sequentially, on a fresh world.

Prints one JSON object; ``--out`` also writes it to a file.

Usage::

    python benchmarks/attributes.py [--runs 100000] [--out benchmarks/results/attributes.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import worlds
from workflow import Unique, find_run, list_runs, start, workflow


@workflow
async def order_flow(n: int) -> int:
    return n


async def fill(world: worlds.World, runs: int) -> float:
    began = time.perf_counter()
    batch = 200
    for first in range(0, runs, batch):
        async with anyio.create_task_group() as group:
            for i in range(first, min(first + batch, runs)):
                attributes = {
                    "tenant": f"t-{i % 100}",
                    "customer": f"c-{i % 5000}",
                    "order": Unique(f"o-{i}"),
                }
                group.start_soon(_start, world, i, attributes)
    return time.perf_counter() - began


async def _start(world: worlds.World, i: int, attributes: dict[str, Any]) -> None:
    await start(order_flow, i, attributes=attributes, world=world)


async def timed(samples: int, call: Any) -> dict[str, float]:
    latencies = []
    for _ in range(samples):
        began = time.perf_counter()
        await call()
        latencies.append((time.perf_counter() - began) * 1000)
    latencies.sort()
    return {
        "median_ms": round(statistics.median(latencies), 3),
        "p95_ms": round(latencies[int(0.95 * len(latencies)) - 1], 3),
    }


async def search(url: str, runs: int) -> dict[str, Any]:
    world = worlds.open(url)
    async with world:
        fill_seconds = await fill(world, runs)
        rng = random.Random(7)

        async def by_customer() -> None:
            page = await list_runs(
                attributes={"customer": f"c-{rng.randrange(5000)}"}, limit=20, world=world
            )
            assert len(page) == min(20, runs // 5000)

        async def by_tenant_page_two() -> None:
            first = await list_runs(
                attributes={"tenant": f"t-{rng.randrange(100)}"}, limit=50, world=world
            )
            await list_runs(
                attributes={"tenant": "t-1"}, limit=50, cursor=first.next_cursor, world=world
            )

        async def by_two_attributes() -> None:
            c = rng.randrange(5000)
            await list_runs(
                attributes={"tenant": f"t-{c % 100}", "customer": f"c-{c}"}, world=world
            )

        async def holder() -> None:
            assert await find_run("order", f"o-{rng.randrange(runs)}", world=world) is not None

        return {
            "runs": runs,
            "fill_seconds": round(fill_seconds, 1),
            "list_runs_by_customer_20": await timed(300, by_customer),
            "list_runs_by_tenant_two_pages_of_50": await timed(300, by_tenant_page_two),
            "list_runs_by_tenant_and_customer": await timed(300, by_two_attributes),
            "find_run": await timed(300, holder),
        }


async def claim_cost(url: str, n: int) -> dict[str, Any]:
    world = worlds.open(url)
    async with world:
        variants = {
            "plain": lambda i: start(order_flow, i, world=world),
            "one_unique": lambda i: start(
                order_flow, i, attributes={"order": Unique(f"o-{i}")}, world=world
            ),
            "idempotency_key": lambda i: start(
                order_flow, i, idempotency_key=f"k-{i}", world=world
            ),
        }
        result: dict[str, Any] = {}
        for name, call in variants.items():
            for i in range(50):
                await call(-1 - i - 1000 * len(result))
            began = time.perf_counter()
            for i in range(n):
                await call(i)
            result[f"{name}_us_per_start"] = round((time.perf_counter() - began) / n * 1e6, 1)
        result["unique_over_plain"] = round(
            result["one_unique_us_per_start"] / result["plain_us_per_start"], 2
        )
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--starts", type=int, default=3000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = {
            "search": anyio.run(search, f"sqlite:///{tmp}/search.db", args.runs),
            "claims": anyio.run(claim_cost, f"sqlite:///{tmp}/claims.db", args.starts),
        }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
