"""Server time of the web UI's pages over a world of 1,000,000 runs (SQLite, or PostgreSQL).

1. Fills a SQLite world with N runs (default 1,000,000) through ``start``: each
   has a ``tenant`` (100 values), a ``customer`` (5,000 values) and a unique
   ``order``; every 50th run is cancelled, so statuses differ. ``--db`` keeps the
   file, and a later run with the same ``--db`` reuses it instead of filling.
2. Calls the ASGI app of ``workflow.ui.create_app`` in-process, as a server
   would, and times each request from the call until the last body byte is
   sent: the server's time, without a network or a browser. Pages of 50 runs.

Prints one JSON object (median and p95 in ms per page); ``--out`` writes it too.

Usage::

    python -m benchmarks.ui_list [--runs 1000000] [--db /tmp/ui-bench.db] [--out FILE]
    python -m benchmarks.ui_list --postgres [--runs 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio

import worlds
from workflow import Unique, list_runs, start, workflow
from workflow.ui import create_app

Message = MutableMapping[str, Any]
App = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[Message]],
        Callable[[Message], Awaitable[None]],
    ],
    Awaitable[None],
]


@workflow
async def order_flow(n: int) -> int:
    return n


async def fill(world: worlds.World, runs: int) -> float:
    began = time.perf_counter()
    batch = 500
    for first in range(0, runs, batch):
        async with anyio.create_task_group() as group:
            for i in range(first, min(first + batch, runs)):
                group.start_soon(_start, world, i)
        if first % 100_000 == 0:
            print(f"filled {first} runs in {time.perf_counter() - began:.0f} s", flush=True)
    return time.perf_counter() - began


async def filled(world: worlds.World, runs: int) -> tuple[float | None, int]:
    """Fill an empty world with ``runs`` runs (a world with runs is reused as it is):
    the seconds filling took (None if reused), and the runs the world now holds."""
    existing = await list_runs(limit=1, world=world)
    fill_seconds = None if existing.runs else round(await fill(world, runs), 1)
    facts = await world.info()
    return fill_seconds, sum(int(v) for k, v in facts.items() if str(k).startswith("runs."))


async def _start(world: worlds.World, i: int) -> None:
    attributes = {"tenant": f"t-{i % 100}", "customer": f"c-{i % 5000}", "order": Unique(f"o-{i}")}
    run = await start(order_flow, i, attributes=attributes, world=world)
    if i % 50 == 0:
        await run.cancel("benchmark", grace=None)


async def request(app: App, path: str) -> tuple[int, int]:
    """Status and body size of GET ``path``, served by ``app`` in-process."""
    target, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": target,
        "raw_path": target.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8233")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8233),
    }
    status, size = 0, 0

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status, size
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            size += len(message.get("body", b""))

    await app(scope, receive, send)
    return status, size


async def timed(app: App, path: str, samples: int) -> dict[str, Any]:
    latencies = []
    status, size = await request(app, path)  # warm: templates compiled, statements prepared
    assert status == 200, (path, status)
    for _ in range(samples):
        began = time.perf_counter()
        await request(app, path)
        latencies.append((time.perf_counter() - began) * 1000)
    latencies.sort()
    return {
        "path": path,
        "median_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(latencies[max(0, int(0.95 * len(latencies)) - 1)], 2),
        "bytes": size,
    }


async def measure(url: str, runs: int, samples: int) -> dict[str, Any]:
    world = worlds.open(url)
    async with world:
        fill_seconds, total = await filled(world, runs)
        app: App = create_app(world, live_seconds=0)
        newest = (await list_runs(limit=1, world=world)).runs[0].id
        second = (await list_runs(limit=50, world=world)).next_cursor
        assert second is not None
        pages = {
            "list_newest_50": "/",
            "list_page_2": "/?" + urlencode({"cursor": second}),
            "list_query_customer": "/?" + urlencode({"q": "customer = 'c-42'"}),
            "list_query_tenant_and_status": "/?"
            + urlencode({"q": "tenant = 't-50' AND status = 'cancelled'"}),
            "list_status_filter": "/?status=cancelled",
            "list_query_starts_with": "/?" + urlencode({"q": "customer STARTS_WITH 'c-49'"}),
            "api_runs_50": "/api/runs",
            "api_query_customer": "/api/runs?" + urlencode({"q": "customer = 'c-42'"}),
            "run_detail": f"/runs/{newest}",
        }
        results = {name: await timed(app, path, samples) for name, path in pages.items()}
        began = time.perf_counter()
        counts = await world.info()  # what /fragments/counts shows, uncached
        assert sum(int(v) for k, v in counts.items() if str(k).startswith("runs.")) == total
        results["status_counts_uncached"] = {
            "path": "/fragments/counts (World.info(), before the UI's cache)",
            "ms": round((time.perf_counter() - began) * 1000, 2),
        }
    return {
        "runs": total,
        "fill_seconds": fill_seconds,
        "samples": samples,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores (shared)",
        "pages": results,
    }


Measure = Callable[[str, int, int], Awaitable[dict[str, Any]]]
"""``measure(world_url, runs, samples)``: a UI benchmark's report over one world."""


def cli(doc: str | None, measure: Measure, *, samples: int) -> None:
    """The command line of a UI benchmark: ``--runs``, ``--samples``, ``--db`` (keep or
    reuse the SQLite file), ``--postgres`` (a throwaway server instead), ``--out``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=samples)
    parser.add_argument("--db", type=Path, help="keep (or reuse) the world in this file")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="measure a PostgreSQL world on a throwaway server (tests/pg_server.py) instead",
    )
    args = parser.parse_args()
    if args.postgres:
        from tests import pg_server

        directory = tempfile.mkdtemp(prefix="wf-pg-ui-bench-")
        try:
            server = pg_server.start(directory)
            report = anyio.run(measure, server.socket_url, args.runs, args.samples)
        finally:
            pg_server.stop(directory)
            shutil.rmtree(directory, ignore_errors=True)
        report["world"] = "postgresql"
    else:
        with tempfile.TemporaryDirectory() as tmp:
            db = args.db or Path(tmp) / "ui.db"
            report = anyio.run(measure, f"sqlite:///{db}", args.runs, args.samples)
        report["world"] = "sqlite"
    report["load_after"] = os.getloadavg()[0]  # the shared machine's 1-minute load
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


def main() -> None:
    cli(__doc__, measure, samples=100)


if __name__ == "__main__":
    main()
