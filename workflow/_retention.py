"""Retention per closed status: ``set_retention`` and ``get_retention``.

Each closed status may have a window (``keep``, a ``timedelta``): workers
prune the runs closed as that status longer ago than it (``Worker``'s
retention loop, ``World.prune_expired``), in batches, keeping their unique
claims as tombstones. A status with no window is kept forever. The windows
are world settings (``World.put_setting``), one key per status
(``retention.<status>``, seconds as text), so two operators setting two
statuses at once never overwrite each other. A pinned run
(``Run.pin``) is never pruned.
"""

from __future__ import annotations

from datetime import timedelta

from workflow._world_resolution import resolve_world
from worlds.protocol import World
from worlds.semantics import CLOSED_STATUSES
from worlds.types import RunStatus

__all__ = ["get_retention", "read_windows", "set_retention"]

_PREFIX = "retention."


def _status(status: RunStatus | str) -> RunStatus:
    try:
        chosen = RunStatus(status)
    except ValueError:
        raise ValueError(
            f"retention is set per closed status ({', '.join(CLOSED_STATUSES)}), not {status!r}"
        ) from None
    if chosen not in CLOSED_STATUSES:
        raise ValueError(
            f"retention is set per closed status ({', '.join(CLOSED_STATUSES)}); "
            f"{chosen.value} runs are open and never pruned"
        )
    return chosen


async def set_retention(
    status: RunStatus | str, keep: timedelta | None, *, world: World | None = None
) -> None:
    """Keep runs closed as ``status`` for ``keep``, then let workers prune them.

    ``keep=None`` removes the window: such runs are kept until pruned by hand
    (``prune_runs``). Workers apply the windows in the background, in batches
    (``Worker(retention_interval=...)``), keeping pruned runs' unique claims as
    tombstones; a pinned run (``Run.pin``) is never pruned.

    Raises:
        ValueError: ``status`` is not a closed status, or ``keep`` is negative.
        TypeError: ``keep`` is not a ``timedelta`` (or ``None``).
    """
    chosen = _status(status)
    if keep is not None and not isinstance(keep, timedelta):
        raise TypeError(f"keep is a timedelta (or None), not {type(keep).__name__}")
    if keep is not None and keep < timedelta(0):
        raise ValueError(f"keep must be >= 0, got {keep}")
    value = None if keep is None else repr(keep.total_seconds())
    await resolve_world(world).put_setting(_PREFIX + chosen.value, value)


async def get_retention(*, world: World | None = None) -> dict[RunStatus, timedelta]:
    """The retention window of each closed status that has one (``set_retention``)."""
    return {
        status: timedelta(seconds=seconds)
        for status, seconds in (await read_windows(resolve_world(world))).items()
    }


async def read_windows(world: World) -> dict[RunStatus, float]:
    """The windows stored in ``world``, in seconds, as ``World.prune_expired`` takes them."""
    found: dict[RunStatus, float] = {}
    for status in CLOSED_STATUSES:
        value = await world.setting(_PREFIX + status.value)
        if value is not None:
            found[status] = float(value)
    return found
