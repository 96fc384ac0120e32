"""Two builds side by side: runs stay on the build that started them, v1 drains.

    python examples/deployments.py

Starts a v1 worker, a pinned run and a ``pin="latest"`` run that wait on a hook,
then a v2 worker (the newest build from then on) and a new run; resumes the hooks
and prints which build ran each step, then whether v1 is drained. The same code
plays both builds here; in production each build is its own deploy
(``wf worker app --build-id v2``) and ``wf deployments drain v1 --wait`` says when
v1's workers may stop.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

import worlds
from workflow import Run, Worker, create_hook, resume_hook, start, step, workflow
from workflow.deployments import drained, list_deployments
from worlds.types import HookCreated, StepCompleted


@step
async def charge(order: str) -> str:
    return f"charged {order}"


@step
async def ship(order: str) -> str:
    return f"shipped {order}"


@workflow
async def checkout(order: str) -> str:
    """Pinned (the default): every task on the build of its first task."""
    charged = await charge(order)
    await create_hook(f"ship-{order}")
    return f"{charged}, {await ship(order)}"


@workflow(pin="latest")
async def subscription(user: str) -> str:
    """Moves to the newest build at its next task (guard changes with patched())."""
    charged = await charge(user)
    await create_hook(f"renew-{user}")
    return f"{charged}, {await ship(user)}"


async def _hooked(run: Run[str]) -> None:
    while not any(isinstance(event, HookCreated) for event in await run.events()):
        await anyio.sleep(0.01)


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        world = worlds.open(f"sqlite:///{Path(folder) / 'world.db'}")
        async with world, Worker(world, [checkout, subscription], build_id="v1"):
            old = await start(checkout, "o-1", world=world)
            moving = await start(subscription, "u-1", world=world)
            await _hooked(old)
            await _hooked(moving)
            async with Worker(world, [checkout, subscription], build_id="v2"):
                new = await start(checkout, "o-2", world=world)
                await _hooked(new)
                for token in ("ship-o-1", "renew-u-1", "ship-o-2"):
                    await resume_hook(token, None, world=world)
                for name, run in (("o-1", old), ("u-1", moving), ("o-2", new)):
                    await run.result(timeout=30)
                    events = await run.events()
                    builds = [str(e.build_id) for e in events if isinstance(e, StepCompleted)]
                    print(f"{name}: steps ran on {', '.join(builds)}")
                for record in await list_deployments(world=world):
                    print(f"{record.build_id}: {record.open_runs} open, newest={record.newest}")
                print(f"v1 drained: {await drained('v1', world=world)}")


if __name__ == "__main__":
    anyio.run(main)
