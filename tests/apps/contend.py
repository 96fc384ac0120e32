"""Contend for one unique pair from a separate OS process; print outcomes as JSON.

    python -m tests.apps.contend URL unique|cancel COUNT VALUE

``unique``: COUNT concurrent ``start`` calls claiming ``order=VALUE``.
``cancel``: COUNT concurrent ``start_or_cancel_run`` calls for ``order=VALUE``,
with a worker running so the runs really start steps while they are replaced.
"""

from __future__ import annotations

import json
import sys

import anyio

import worlds
from workflow import AttributeConflictError, Unique, Worker, start, step, workflow
from workflow.policies import start_or_cancel_run


@step
async def plan_step(n: int) -> int:
    await anyio.sleep(0.01)
    return n + 1


@workflow
async def plan(steps: int) -> int:
    total = 0
    for _ in range(steps):
        total = await plan_step(total)
    return total


async def main(url: str, mode: str, count: int, value: str) -> None:
    world = worlds.open(url)
    outcomes: list[str] = []

    async def unique_start() -> None:
        try:
            run = await start(plan, 0, attributes={"order": Unique(value)}, world=world)
            outcomes.append(f"run {run.id}")
        except AttributeConflictError as exc:
            outcomes.append(f"conflict {exc.existing_run_id}")

    async def newest_wins() -> None:
        run = await start_or_cancel_run(plan, 50, key="order", value=value, world=world)
        outcomes.append(f"run {run.id}")

    async with world:
        if mode == "unique":
            async with anyio.create_task_group() as group:
                for _ in range(count):
                    group.start_soon(unique_start)
        else:
            async with Worker(world, [plan]):
                for _ in range(count):
                    await newest_wins()
                    await anyio.sleep(0.02)
    print(json.dumps(outcomes))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
