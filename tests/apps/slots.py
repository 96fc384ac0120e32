"""Start runs into one limited pair from a separate OS process, and work on them.

    python -m tests.apps.slots URL COUNT VALUE LIMIT [VALUES]

Starts COUNT runs of ``held`` at once, each with ``tenant=Limited(VALUE,
LIMIT)`` (with VALUES, the values ``VALUE-0`` ... ``VALUE-{VALUES-1}`` in
turn), while a Worker of this process executes whatever runs it gets (its
own or another process's); waits until its own runs completed and prints
their ids as JSON.
"""

from __future__ import annotations

import json
import sys

import anyio

import worlds
from workflow import Limited, Worker, get_run, start, step, workflow


@step
async def hold_a_while(n: int) -> int:
    await anyio.sleep(0.02)
    return n


@workflow
async def held(n: int) -> int:
    return await hold_a_while(n)


async def main(url: str, count: int, value: str, limit: int, values: int = 0) -> None:
    world = worlds.open(url)
    started: list[str] = []

    async def one(n: int) -> None:
        which = f"{value}-{n % values}" if values else value
        run = await start(held, n, attributes={"tenant": Limited(which, limit)}, world=world)
        started.append(run.id)

    async with world, Worker(world, [held]):
        async with anyio.create_task_group() as group:
            for n in range(count):
                group.start_soon(one, n)
        with anyio.fail_after(240):
            for run_id in started:
                await get_run(run_id, world=world).result()
    print(json.dumps(started))


if __name__ == "__main__":
    values = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    anyio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), values)
