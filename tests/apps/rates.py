"""Start rate-limited runs, or work on them, from a separate OS process.

    python -m tests.apps.rates start URL COUNT VALUE LIMIT PER
    python -m tests.apps.rates work URL TOTAL VALUE GO

``start`` starts COUNT runs of ``rated`` at once, each with
``customer=RateLimited(VALUE, LIMIT, per=PER)``, runs no worker, and prints their
ids as JSON. ``work`` waits until the file GO exists (the test makes it once the
starters are done, so every worker comes late), then runs a Worker until TOTAL
runs of VALUE completed, and prints how many bodies it began.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

import worlds
from workflow import RateLimited, RunStatus, Worker, list_runs, start, step, workflow

began = 0


@step
async def call_the_api(n: int) -> int:
    return n


@workflow
async def rated(n: int) -> int:
    global began
    began += 1  # counted on every replay too: only a sign this worker did work
    return await call_the_api(n)


async def starter(url: str, count: int, value: str, limit: int, per: float) -> None:
    started: list[str] = []
    async with worlds.open(url) as world:

        async def one(n: int) -> None:
            customer = RateLimited(value, limit, per=per)
            run = await start(rated, n, attributes={"customer": customer}, world=world)
            started.append(run.id)

        async with anyio.create_task_group() as group:
            for n in range(count):
                group.start_soon(one, n)
    print(json.dumps(started))


async def worker(url: str, total: int, value: str, go: Path) -> None:
    with anyio.fail_after(240):
        while not go.exists():
            await anyio.sleep(0.05)
        async with worlds.open(url) as world, Worker(world, [rated], poll_interval=0.05):
            while True:
                done = await list_runs(
                    attributes={"customer": value},
                    status=RunStatus.COMPLETED,
                    limit=total,
                    world=world,
                )
                if len(done) >= total:
                    break
                await anyio.sleep(0.1)
    print(json.dumps(began))


if __name__ == "__main__":
    role, url = sys.argv[1], sys.argv[2]
    if role == "start":
        args = (int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
        anyio.run(starter, url, *args)
    else:
        anyio.run(worker, url, int(sys.argv[3]), sys.argv[4], Path(sys.argv[5]))
