"""Workflows for the pinned-deployment process test: a step, a hook, another step.

The same module serves builds v1 and v2 (``wf worker tests.apps.deployapp --build-id
v1``): which build ran each step is what the worker records in its
``StepCompleted`` (``build_id``), not anything the code returns.
"""

from __future__ import annotations

from workflow import create_hook, step, workflow


@step
async def stage(number: int) -> int:
    return number


@workflow
async def pinned(token: str) -> int:
    """Stays on the build that ran its first task (``pin="run"``, the default)."""
    first = await stage(1)
    await create_hook(token)
    return first + await stage(2)


@workflow(pin="latest")
async def moving(token: str) -> int:
    """Moves to the newest build at its next task."""
    first = await stage(1)
    await create_hook(token)
    return first + await stage(2)
