"""Storage backends ("worlds") behind one protocol, chosen by URL.

    import worlds
    world = worlds.open("sqlite:///app.db")     # or "memory://", "postgresql://..."
    async with world:
        ...

``open`` is synchronous and connects lazily. Built-in schemes are ``memory``,
``sqlite`` and ``postgresql``; third parties register more through the
``workflow.worlds`` entry-point group (``scheme = "package.module:factory"``,
where the factory takes the URL and returns a world).

Two keywords say what the caller needs from the world, and every built-in
world honours them (a registered factory honours them by accepting them as
keyword arguments; ``open`` refuses to pass them to one that does not):

- ``create=False``: the world must already exist; nothing is created on disk
  or in the database (a missing SQLite file, PostgreSQL schema or an always
  new memory world is a ``WorldMisconfiguredError`` naming what is missing).
- ``shared=True``: the world must outlive this process and be visible to
  others (``memory://`` and ``sqlite:///:memory:`` refuse, with the reason).

Show a world URL only through ``redact_url``, which masks its password.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from importlib.metadata import entry_points

from worlds._urls import redact_url
from worlds.protocol import PROTOCOL_VERSION, World

__all__ = [
    "DEFAULT_URL",
    "PROTOCOL_VERSION",
    "World",
    "known_schemes",
    "open",
    "redact_url",
    "url_from_env",
]

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


def open(  # noqa: A001 - mirrors the builtin on purpose
    url: str | None = None, *, create: bool = True, shared: bool = False
) -> World:
    """Return the world for ``url`` (default: ``url_from_env()``) without connecting.

    Args:
        url: the world URL.
        create: ``False`` if the world must already exist: its first operation
            then raises ``WorldMisconfiguredError`` naming what is missing
            instead of creating it (for read-only tools).
        shared: ``True`` if the world must outlive this process (for a command
            line tool): a world held in process memory refuses at once.

    Raises:
        ValueError: the URL is malformed or its scheme is unknown (the message
            lists the known schemes), or a registered factory cannot honour
            ``create=False`` / ``shared=True``.
        WorldMisconfiguredError: the world cannot give what ``create`` or
            ``shared`` asks for (a memory world with either).
    """
    url = url or url_from_env()
    shown = redact_url(url)
    scheme, sep, _ = url.partition("://")
    factories = _factories()
    if not sep or not scheme:
        raise ValueError(
            f"malformed world URL {shown!r}: expected SCHEME://..., one of {known_schemes()}"
        )
    scheme = scheme.lower().split("+", 1)[0]
    if scheme == "postgres":
        scheme = "postgresql"
    target = factories.get(scheme)
    if target is None:
        raise ValueError(f"unknown world scheme {scheme!r} in {shown!r}; known: {known_schemes()}")
    factory: Callable[..., World]
    if isinstance(target, str):
        module_name, _, attr = target.partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
    else:
        factory = target
    needs = {
        name: value
        for name, value in (("create", create), ("shared", shared))
        if value != (name == "create")
    }
    if needs and not _accepts(factory, needs):
        raise ValueError(
            f"the {scheme!r} world cannot promise {needs}: its factory takes no such keywords"
        )
    world = factory(url, **needs)
    if getattr(world, "protocol_version", None) != PROTOCOL_VERSION:
        raise ValueError(
            f"world for {scheme!r} speaks protocol {getattr(world, 'protocol_version', None)}, "
            f"this runtime needs {PROTOCOL_VERSION}"
        )
    return world


def _accepts(factory: Callable[..., World], keywords: dict[str, bool]) -> bool:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return True
    return all(name in parameters for name in keywords)
