"""A workload for archive and copy tests: closed runs, and open runs waiting on timers,
hooks, ``Limited`` slots and children, each holding a unique ``order`` pair.

``start_workload`` starts it on a world and waits until every open run waits;
``finish_workload`` (on the same world or a copy) resumes the hooks and collects
each run's result by its order. A run's result depends only on its order, so
the results are the same on any world, copied or not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from workflow import (
    HookNotFoundError,
    Limited,
    Run,
    RunStatus,
    Unique,
    create_hook,
    get_run,
    list_hooks,
    resume_hook,
    sleep,
    start,
    step,
    workflow,
)
from workflow.decorators import WorkflowDefinition
from worlds.protocol import World
from worlds.types import WaitCreated

NAP = 4.0
"""Seconds a napper's timer waits: long enough to be waiting when the copy runs."""

LANE_LIMIT = 2


@step
async def bump(n: int) -> int:
    return n + 1


@workflow(name="archives-quick")
async def quick(n: int) -> int:
    return await bump(n)


@workflow(name="archives-napper")
async def napper(n: int) -> int:
    await sleep(NAP)
    return await bump(n) * 2


async def _on_hook(kind: str, n: int) -> str:
    """What the hook ``{kind}-{n}`` receives, with the run's kind and number."""
    return f"{kind} {n}:{await create_hook(f'{kind}-{n}')}"


@workflow(name="archives-hooked")
async def hooked(n: int) -> str:
    return await _on_hook("hooked", n)


@workflow(name="archives-laned")
async def laned(n: int) -> str:
    return await _on_hook("laned", n)


@workflow(name="archives-kid")
async def kid(n: int) -> str:
    return await _on_hook("kid", n)


@workflow(name="archives-parent")
async def parent(n: int) -> str:
    child = await start(kid, n)
    return f"parent of {await child.result()}"


FUNCTIONS = [quick, napper, hooked, laned, kid, parent, bump]


@dataclass
class Workload:
    """What ``start_workload`` started: run ids by order, and the open ones' tokens."""

    runs: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    """Hook token -> the order of the run it finishes."""
    quick: list[str] = field(default_factory=list)
    nappers: list[str] = field(default_factory=list)


async def start_workload(world: World, *, closed: int, open_runs: int) -> Workload:
    """Start ``closed`` quick runs and ``open_runs`` open ones (a quarter each napping,
    on a hook, in a lane of ``LANE_LIMIT`` slots, a parent of a child on a hook); a
    Worker must be serving ``world``. Returns once every run waits or is closed."""
    load = Workload()
    quarter = max(open_runs // 4, 1)
    # the nappers last, so their timers are still running when the caller moves on
    kinds: list[tuple[WorkflowDefinition[..., Any], int]] = [
        (hooked, quarter),
        (laned, quarter),
        (parent, quarter),
        (napper, quarter),
    ]
    n = 0
    for fn, count in [(quick, closed), *kinds]:
        for _ in range(count):
            n += 1
            order = f"o-{n}"
            attributes: dict[str, object] = {"order": Unique(order)}
            if fn is laned:
                attributes["lane"] = Limited("l", LANE_LIMIT)
                load.tokens[f"laned-{n}"] = order
            elif fn is hooked:
                load.tokens[f"hooked-{n}"] = order
            elif fn is parent:
                load.tokens[f"kid-{n}"] = order
            run = await start(fn, n, attributes=attributes, world=world)
            load.runs[order] = run.id
            if fn is quick:
                load.quick.append(run.id)
            elif fn is napper:
                load.nappers.append(run.id)
    await _until_waiting(world, load, quarter)
    return load


async def _until_waiting(world: World, load: Workload, quarter: int) -> None:
    """Every quick run closed, every napper's timer set and every hook there is to
    create (the lane's holders', not its waiters') created."""
    hooks_expected = quarter + min(quarter, LANE_LIMIT) + quarter
    with anyio.fail_after(180):
        while True:
            hooks = len(await list_hooks(world=world))
            closed = [await get_run(r, world=world).status() for r in load.quick]
            napping = [await get_run(r, world=world).events() for r in load.nappers]
            if (
                hooks >= hooks_expected
                and all(s is RunStatus.COMPLETED for s in closed)
                and all(any(isinstance(e, WaitCreated) for e in log) for log in napping)
            ):
                return
            await anyio.sleep(0.1)


async def finish_workload(world: World, load: Workload) -> dict[str, object]:
    """Resume every hook (a lane's waiters once promoted) and collect each run's result
    by order; a Worker must be serving ``world``."""
    left = dict(load.tokens)
    with anyio.fail_after(180):
        while left:
            for token, order in list(left.items()):
                if await _resume(world, token, f"p-{order}"):
                    del left[token]
            if left:
                await anyio.sleep(0.05)
        results: dict[str, object] = {}
        for order, run_id in load.runs.items():
            run: Run[object] = get_run(run_id, world=world)
            results[order] = await run.result(timeout=120)
    return results


async def _resume(world: World, token: str, payload: str) -> bool:
    try:
        await resume_hook(token, payload, world=world)
    except HookNotFoundError:  # a lane's waiter not promoted yet, or a child not there
        return False
    return True
