"""Pinned deployments from the client's side: the builds workers registered with,
what each still runs, and whether an old one can go (RFC 0025).

Run workers with a build id (``Worker(world, fns, build_id="v2")`` or ``wf worker
--build-id v2``): each run stays on the build that ran its first task unless its
workflow is ``@workflow(pin="latest")``; new runs go to the newest build.
``list_deployments`` shows every build; ``drained`` says whether no open run needs
one any more, so its workers can be stopped.
"""

from __future__ import annotations

from workflow._world_resolution import resolve_world
from worlds.protocol import World
from worlds.types import DeploymentRecord

__all__ = ["DeploymentRecord", "drained", "get_deployment", "list_deployments"]


async def list_deployments(*, world: World | None = None) -> list[DeploymentRecord]:
    """Every build id workers registered with, newest registration first: its
    workflows, its open runs (``open_runs``) and how many of them still need it
    (``pinned_runs``: pinned to it, or ``pin="latest"`` ones while it is the newest),
    its live workers and whether it is the newest build (where new runs go)."""
    return await resolve_world(world).list_deployments()


async def get_deployment(build_id: str, *, world: World | None = None) -> DeploymentRecord | None:
    """The deployment of ``build_id``, or ``None`` if no worker registered with it."""
    for record in await list_deployments(world=world):
        if record.build_id == build_id:
            return record
    return None


async def drained(build_id: str, *, world: World | None = None) -> bool:
    """Whether no open run needs ``build_id`` any more (its workers may stop): none
    is pinned to it, and it is not the newest build while ``latest`` runs are on it.
    A build no worker ever registered with is drained.
    """
    record = await get_deployment(build_id, world=world)
    return record is None or record.pinned_runs == 0
