"""Timer lateness while many callers wait on ``Run.result()`` in the same process.

Issue 33: with 2,000 concurrent ``run.result()`` waiters in one process, 10 s
timers fired up to 16 s late, because each waiter re-read its run about once
a second (every 50 ms on SQLite). This measures it: one in-process Worker on a
fresh world, ``--waiters`` runs parked on a hook with a ``result()`` call
waiting on each, then ``--timers`` runs that each sleep ``--seconds`` (a
durable timer) and stamp the wall clock in a step. A timer's lateness is the
stamp minus the time it was due (``WaitCreated.until``). Each count in
``--counts`` (default ``0,2000``) is measured on a fresh world. Also reports
the world reads (``get_run``/``list_runs``/``read_events`` through a counting
wrapper) the waiters made per second.

Runs on SQLite by default (``--world`` takes a URL template with ``{dir}`` for
a fresh directory, or a ``postgresql://`` URL). Prints one JSON object;
``--out`` writes it too.

Usage::

    python benchmarks/waiters.py [--counts 0,2000] [--timers 50] [--seconds 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

import worlds
from workflow import (
    Run,
    RunCancelledError,
    Worker,
    create_hook,
    get_run,
    sleep,
    start,
    step,
    workflow,
)
from worlds.types import WaitCreated
from worlds.wrapper import WorldWrapper


class CountingReads(WorldWrapper):
    """Counts the reads a ``result()`` waiter can make (``READS``)."""

    reads = 0


READS = ("get_run", "list_runs", "read_events")


def _counted(name: str) -> Callable[..., Awaitable[Any]]:
    async def read(self: CountingReads, *args: Any) -> Any:
        self.reads += 1
        return await getattr(self.inner, name)(*args)

    return read


for _name in READS:
    setattr(CountingReads, _name, _counted(_name))


@step
async def stamp() -> str:
    return datetime.now(UTC).isoformat()


@workflow
async def timed(seconds: float) -> str:
    await sleep(seconds)
    return await stamp()


@workflow
async def parked() -> None:
    await create_hook()


async def measure(url: str, waiters: int, timers: int, seconds: float) -> dict[str, Any]:
    """Lateness of ``timers`` timers of ``seconds`` while ``waiters`` result() calls wait."""
    async with worlds.open(url) as world:
        counting = CountingReads(world)
        async with Worker(world, [timed, parked], concurrency=256):
            parked_runs = [await start(parked, world=world) for _ in range(waiters)]

            async def wait(run_id: str) -> None:
                with contextlib.suppress(RunCancelledError):  # cancelled at the end
                    await Run(run_id, world=counting).result()

            async with anyio.create_task_group() as group:
                for run in parked_runs:
                    group.start_soon(wait, run.id)
                with anyio.fail_after(600):
                    while counting.reads < waiters:  # every waiter read its run once
                        await anyio.sleep(0.05)
                reads_before, began = counting.reads, time.perf_counter()
                timer_runs = [await start(timed, seconds, world=world) for _ in range(timers)]
                stamps = [
                    datetime.fromisoformat(await r.result(timeout=seconds * 20 + 600))
                    for r in timer_runs
                ]
                elapsed = time.perf_counter() - began
                reads = counting.reads - reads_before
                for parked_run in parked_runs:
                    await parked_run.cancel(grace=None)
            late: list[float] = []
            for timer_run, stamped in zip(timer_runs, stamps, strict=True):
                events = await get_run(timer_run.id, world=world).events()
                due = next(e.until for e in events if isinstance(e, WaitCreated))
                late.append((stamped - due).total_seconds())
    late.sort()
    return {
        "waiters": waiters,
        "timers": timers,
        "timer_seconds": seconds,
        "late_median_s": round(statistics.median(late), 3),
        "late_p95_s": round(late[max(0, int(len(late) * 0.95) - 1)], 3),
        "late_max_s": round(late[-1], 3),
        "waiter_reads_per_s": round(reads / elapsed, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="0,2000", help="waiter counts, comma-separated")
    parser.add_argument("--timers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--world", default="sqlite:///{dir}/world.db")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    for count in (int(c) for c in args.counts.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            url = args.world.format(dir=tmp)
            results.append(anyio.run(measure, url, count, args.timers, args.seconds))
    report = {"world": args.world.split(":", 1)[0], "results": results}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
