"""Which world a client call acts on: the one it was given, or the one in force.

Every client function takes ``world=None``: a world from ``worlds.open(url)``,
or by default the one in force: the worker's, inside a step (the runtime's
``default_world``); else ``$WORKFLOW_WORLD``; else the embedded SQLite file.
Worlds opened that way are cached per event loop.
"""

from __future__ import annotations

import asyncio
import os
import weakref

import worlds
from workflow import _runtime
from worlds.protocol import World

__all__ = ["resolve_world"]

# The worlds opened implicitly, per event loop: a world's connections belong to
# the loop that made them, and they go away with it (weakly keyed, so that a
# loop that ended does not keep them, nor a later loop with the same id reuse them).
_opened: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, World]] = (
    weakref.WeakKeyDictionary()
)
_opened_outside_loops: dict[str, World] = {}


def resolve_world(world: World | None) -> World:
    """``world``, or the world in force: the worker's, else the configured URL's.

    Raises:
        ValueError: ``world`` is None and the configured world is not one that
            the Workers running in this process serve: runs started there would
            wait for a worker that never comes. Pass ``world=`` explicitly.
    """
    if world is not None:
        return world
    in_worker = _runtime.default_world()
    if in_worker is not None:
        return in_worker
    url = worlds.url_from_env()
    try:
        opened = _opened.setdefault(asyncio.get_running_loop(), {})
    except RuntimeError:
        opened = _opened_outside_loops
    if url not in opened:
        opened[url] = worlds.open(url)
    default = opened[url]
    served = _runtime.served_worlds()
    if served and all(_storage(w) != _storage(default) for w in served):
        source = f"${worlds.ENV_VAR}" if os.environ.get(worlds.ENV_VAR) else "the built-in default"
        raise ValueError(
            f"no world= was given, so the default world {url} ({source}) was chosen, but "
            f"the Worker in this process serves {served[0]!r}: a run there would wait for a "
            "worker that never comes. Pass the world explicitly: "
            "start(fn, ..., world=world), get_run(run_id, world=world), ..."
        )
    return default


def _storage(world: World) -> object:
    """What tells two world objects over the same storage apart from others."""
    path = getattr(world, "path", None)
    if isinstance(path, str) and path != ":memory:":
        return ("file", path)
    url = getattr(world, "url", None)
    if isinstance(url, str) and path is None and not url.lower().startswith("memory:"):
        return ("url", url)
    return world  # in-memory storage: only the object itself
