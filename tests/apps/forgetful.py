"""A script that opens a world, runs a workflow and never closes the world.

``python -m tests.apps.forgetful URL`` runs one workflow in ``URL``'s world;
``python -m tests.apps.forgetful default`` uses the world opened implicitly by
``start`` (configured by ``$WORKFLOW_WORLD``). Either prints ``done 42`` and
must then exit.
"""

from __future__ import annotations

import asyncio
import sys

import worlds
from workflow import Worker, start, step, workflow


@step
async def double(x: int) -> int:
    return 2 * x


@workflow
async def twice(x: int) -> int:
    return await double(x)


async def main(url: str) -> None:
    if url == "default":
        run = await start(twice, 21)
        world = run.world
    else:
        world = worlds.open(url)
        run = await start(twice, 21, world=world)
    worker = Worker(world, [twice])
    await worker.__aenter__()
    result = await run.result(timeout=15)
    await worker.__aexit__(None, None, None)
    print("done", result, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
