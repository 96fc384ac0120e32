"""Storage backends ("worlds") behind one protocol, chosen by URL.

    import worlds
    world = worlds.open("sqlite:///app.db")     # or "memory://", "postgresql://..."
    async with world:
        ...

``open`` is synchronous and connects lazily. Built-in schemes are ``memory``
and ``sqlite``; third parties register more through the ``workflow.worlds``
entry-point group (``scheme = "package.module:factory"``, where the factory
takes the URL and returns a world).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from importlib.metadata import entry_points

from worlds.protocol import PROTOCOL_VERSION, World

__all__ = ["DEFAULT_URL", "PROTOCOL_VERSION", "World", "known_schemes", "open", "url_from_env"]

DEFAULT_URL = "sqlite:///.workflow/world.db"
"""The world used when nothing is configured: an SQLite file in the working directory."""

ENV_VAR = "WORKFLOW_WORLD"

_BUILTIN = {
    "memory": "worlds.memory:MemoryWorld",
    "sqlite": "worlds.sqlite:SqliteWorld",
    "postgresql": "worlds.postgres:PostgresWorld",
}


def url_from_env() -> str:
    """The configured world URL: ``$WORKFLOW_WORLD``, else ``DEFAULT_URL``."""
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def _factories() -> dict[str, str | Callable[[str], World]]:
    found: dict[str, str | Callable[[str], World]] = dict(_BUILTIN)
    for entry in entry_points(group="workflow.worlds"):
        found.setdefault(entry.name, entry.value)
    return found


def known_schemes() -> list[str]:
    """Every scheme ``open`` accepts, built-in and registered."""
    return sorted(_factories())


def open(url: str | None = None) -> World:  # noqa: A001 - mirrors the builtin on purpose
    """Return the world for ``url`` (default: ``url_from_env()``) without connecting.

    Raises:
        ValueError: the URL is malformed or its scheme is unknown; the message
            lists the known schemes.
    """
    url = url or url_from_env()
    scheme, sep, _ = url.partition("://")
    factories = _factories()
    if not sep or not scheme:
        raise ValueError(
            f"malformed world URL {url!r}: expected SCHEME://..., one of {known_schemes()}"
        )
    scheme = scheme.lower().split("+", 1)[0]
    if scheme == "postgres":
        scheme = "postgresql"
    target = factories.get(scheme)
    if target is None:
        raise ValueError(f"unknown world scheme {scheme!r} in {url!r}; known: {known_schemes()}")
    factory: Callable[[str], World]
    if isinstance(target, str):
        module_name, _, attr = target.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
    else:
        factory = target
    world = factory(url)
    if getattr(world, "protocol_version", None) != PROTOCOL_VERSION:
        raise ValueError(
            f"world for {scheme!r} speaks protocol {getattr(world, 'protocol_version', None)}, "
            f"this runtime needs {PROTOCOL_VERSION}"
        )
    return world
