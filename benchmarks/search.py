"""Attribute search at scale: ``list_runs`` with one and two attribute filters.

Fills a SQLite world and a PostgreSQL world with N runs (default 1,000,000),
each with a ``tenant`` (100 values, 10,000 runs each at 1M) and a ``customer``
(5,000 values, 200 runs each; a customer belongs to one tenant), then times
``list_runs`` (default page of 100) through the public API:

- ``tenant``: one tenant, one page;
- ``customer``: one customer, one page;
- ``tenant_and_customer`` and ``customer_and_tenant``: both filters, in either
  order (the order a naive compiler scans them in).

How the data is made: the world creates its schema (its own migrations), then
the rows go straight into its ``runs`` and ``attributes`` tables in bulk
(SQLite ``executemany`` in one transaction, PostgreSQL ``COPY``), with the
columns, id format (``semantics.new_run_id``), attribute blob (msgpack, as the
world encodes it) and index text (``semantics.index_value``) the world itself
writes; then ``ANALYZE`` (PostgreSQL ``VACUUM (FREEZE, ANALYZE)``, so index-only
scans need no heap visits, as on a settled table). Filling takes minutes; ``--data DIR`` keeps the
SQLite file and the PostgreSQL schema, and a later run with the same
``--data`` (and ``--pg-url``) reuses them, so the same data can be searched by
another checkout's code (``--code DIR``: that checkout's ``worlds`` package is
imported instead of this one's), which is how before/after were compared.

Usage::

    python benchmarks/search.py [--runs 1000000] [--samples 300] [--worlds sqlite,postgres]
        [--pg-url URL] [--data DIR] [--code DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import msgspec

ROOT = Path(__file__).resolve().parent.parent
TENANTS, CUSTOMERS = 100, 5000
SCHEMA = "search_bench"
"""The PostgreSQL schema of the data; ``--runs`` is appended (one schema per size)."""


def _rows(runs: int) -> Iterator[tuple[str, datetime, bytes, str, str]]:
    """(run id, created at, attribute blob, tenant index text, customer index text) per run."""
    from worlds.semantics import index_value, new_run_id

    encode = msgspec.msgpack.encode
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(runs):
        tenant, customer = f"t-{i % TENANTS}", f"c-{i % CUSTOMERS}"
        blob = encode({"tenant": tenant, "customer": customer})
        created = start + timedelta(milliseconds=i)
        yield new_run_id(), created, blob, index_value(tenant), index_value(customer)


async def fill_sqlite(path: Path, runs: int) -> float:
    """Create the world's schema at ``path`` and insert ``runs`` runs in bulk; seconds taken."""
    import worlds

    began = time.perf_counter()
    world = worlds.open(f"sqlite:///{path}")
    async with world:
        await world.migrate()
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA synchronous=OFF")
        with db:
            for run_id, created, blob, tenant, customer in _rows(runs):
                micros = int(created.timestamp() * 1_000_000)
                db.execute(
                    "INSERT INTO runs (id, workflow, status, created_at, last_seq, attributes) "
                    "VALUES (?, 'order_flow', 'completed', ?, 2, ?)",
                    (run_id, micros, blob),
                )
                db.executemany(
                    "INSERT INTO attributes (run_id, key, ivalue) VALUES (?, ?, ?)",
                    [(run_id, "tenant", tenant), (run_id, "customer", customer)],
                )
        db.execute("ANALYZE")
    finally:
        db.close()
    return time.perf_counter() - began


async def fill_postgres(url: str, schema: str, runs: int) -> float:
    """Create the world's schema in ``url`` and COPY ``runs`` runs into it; seconds taken."""
    import asyncpg

    from worlds.postgres import PostgresWorld

    began = time.perf_counter()
    world = PostgresWorld(url)
    async with world:
        await world.migrate()
        conn = await asyncpg.connect(world.dsn)
    try:
        run_rows, attribute_rows = [], []
        for run_id, created, blob, tenant, customer in _rows(runs):
            run_rows.append((run_id, "order_flow", "completed", created, 2, created, blob))
            attribute_rows += [(run_id, "tenant", tenant), (run_id, "customer", customer)]
        await conn.copy_records_to_table(
            "runs",
            records=run_rows,
            schema_name=schema,
            columns=["id", "workflow", "status", "created_at", "last_seq", "last_at", "attributes"],
        )
        await conn.copy_records_to_table(
            "attributes",
            records=attribute_rows,
            schema_name=schema,
            columns=["run_id", "key", "ivalue"],
        )
        await conn.execute(f"VACUUM (FREEZE, ANALYZE) {schema}.runs")
        await conn.execute(f"VACUUM (FREEZE, ANALYZE) {schema}.attributes")
    finally:
        await conn.close()
    return time.perf_counter() - began


async def timed(samples: int, call: Callable[[], Awaitable[None]]) -> dict[str, float]:
    """Median and 95th percentile milliseconds of ``samples`` calls (after 20 warm-ups)."""
    for _ in range(20):
        await call()
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


async def search(url: str, runs: int, samples: int) -> dict[str, Any]:
    """Time the four searches on the world at ``url`` holding ``runs`` filled runs."""
    import worlds
    from workflow import list_runs

    per_customer = runs // CUSTOMERS
    world = worlds.open(url)
    async with world:
        rng = random.Random(7)

        async def tenant() -> None:
            page = await list_runs(
                attributes={"tenant": f"t-{rng.randrange(TENANTS)}"}, world=world
            )
            assert len(page) == min(100, runs // TENANTS)

        async def customer() -> None:
            c = f"c-{rng.randrange(CUSTOMERS)}"
            page = await list_runs(attributes={"customer": c}, world=world)
            assert len(page) == min(100, per_customer)

        async def tenant_and_customer() -> None:
            c = rng.randrange(CUSTOMERS)
            both = {"tenant": f"t-{c % TENANTS}", "customer": f"c-{c}"}
            assert len(await list_runs(attributes=both, world=world)) == min(100, per_customer)

        async def customer_and_tenant() -> None:
            c = rng.randrange(CUSTOMERS)
            both = {"customer": f"c-{c}", "tenant": f"t-{c % TENANTS}"}
            assert len(await list_runs(attributes=both, world=world)) == min(100, per_customer)

        return {
            "tenant": await timed(samples, tenant),
            "customer": await timed(samples, customer),
            "tenant_and_customer": await timed(samples, tenant_and_customer),
            "customer_and_tenant": await timed(samples, customer_and_tenant),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--worlds", default="sqlite,postgres")
    parser.add_argument("--pg-url", help="a PostgreSQL URL (default: start a throwaway server)")
    parser.add_argument("--data", type=Path, help="keep (or reuse) the data here")
    parser.add_argument("--code", type=Path, help="import worlds/workflow from this checkout")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(args.code or ROOT))
    sys.path.insert(1, str(ROOT))
    from tests import pg_server

    data = args.data or Path(tempfile.mkdtemp(prefix="wf-search-"))
    data.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"runs": args.runs, "code": str(args.code or ROOT)}
    kinds = [kind for kind in args.worlds.split(",") if kind]
    server = None
    try:
        if "sqlite" in kinds:
            path = data / f"search-{args.runs}.db"
            filled = path.exists()
            fill = None if filled else round(anyio.run(fill_sqlite, path, args.runs), 1)
            result = anyio.run(search, f"sqlite:///{path}", args.runs, args.samples)
            report["sqlite"] = {"fill_seconds": fill, **result}
            print(json.dumps({"sqlite": report["sqlite"]}), file=sys.stderr)
        if "postgres" in kinds:
            base = args.pg_url
            if base is None:
                server = data / "pg"
                base = pg_server.start(server).socket_url
            schema = f"{SCHEMA}_{args.runs}"
            url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
            fill = None
            if not (data / f"postgres-{args.runs}.filled").exists():
                fill = round(anyio.run(fill_postgres, url, schema, args.runs), 1)
                (data / f"postgres-{args.runs}.filled").write_text(url + "\n")
            result = anyio.run(search, url, args.runs, args.samples)
            report["postgres"] = {"fill_seconds": fill, **result}
            print(json.dumps({"postgres": report["postgres"]}), file=sys.stderr)
    finally:
        if server is not None and args.data is None:
            pg_server.stop(server)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
