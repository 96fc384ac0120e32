"""Run ``hold()`` blocks on one pair from a separate OS process.

    python -m tests.apps.holds URL COUNT VALUE LIMIT

Starts COUNT runs of ``gpu_work`` at once, each holding one of LIMIT slots
of ``gpu=VALUE`` around a step, while a Worker of this process executes
whatever runs it gets (its own or another process's); waits until its own
runs completed and prints their ids as JSON.
"""

from __future__ import annotations

import json
import sys

import anyio

import worlds
from workflow import Worker, get_run, hold, start, step, workflow


@step
async def use_the_gpu(n: int) -> int:
    await anyio.sleep(0.02)
    return n


@workflow
async def gpu_work(n: int, value: str, limit: int) -> int:
    async with hold("gpu", value, limit=limit):
        return await use_the_gpu(n)


async def main(url: str, count: int, value: str, limit: int) -> None:
    world = worlds.open(url)
    started: list[str] = []

    async def one(n: int) -> None:
        run = await start(gpu_work, n, value, limit, world=world)
        started.append(run.id)

    async with world, Worker(world, [gpu_work]):
        async with anyio.create_task_group() as group:
            for n in range(count):
                group.start_soon(one, n)
        with anyio.fail_after(240):
            for run_id in started:
                await get_run(run_id, world=world).result()
    print(json.dumps(started))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
