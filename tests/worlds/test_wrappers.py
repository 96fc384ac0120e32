"""Wrapper worlds cover the whole protocol: nothing reaches the inner world by accident.

``WorldWrapper`` must define every member of ``World`` (so ``__getattr__``
never forwards a protocol method), and ``CodecWorld`` must either override a
member or name it in ``CodecWorld.CLEAR`` (it carries no payload): a method
added to the protocol fails here until someone decides, instead of carrying
plaintext to the storage as one once did.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import pytest

from examples.metered_world import MeteredWorld
from worlds import protocol
from worlds.codec import CodecWorld
from worlds.memory import MemoryWorld
from worlds.protocol import World
from worlds.wrapper import WorldWrapper

PARTS = (
    protocol.Lifecycle,
    protocol.Runs,
    protocol.Work,
    protocol.Liveness,
    protocol.Hooks,
    protocol.Updates,
    protocol.Streams,
    protocol.Index,
    protocol.Schedules,
    protocol.Transactions,
    protocol.Archive,
)


def members(proto: type) -> set[str]:
    """The attributes and methods a protocol class and its protocol bases declare."""
    found: set[str] = set()
    for cls in proto.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        found.update(getattr(cls, "__annotations__", {}))
        found.update(
            name
            for name, value in vars(cls).items()
            if callable(value)
            and (not name.startswith("__") or name in ("__aenter__", "__aexit__"))
        )
    return found


def uncovered(proto: type, wrapper: type) -> set[str]:
    """The members of ``proto`` that ``wrapper`` (with its bases below ``object``) lacks."""
    defined: set[str] = set()
    for cls in wrapper.__mro__[:-1]:
        defined.update(vars(cls))
    return members(proto) - defined - {"url"}  # ``url`` is set per object


def test_the_parts_split_the_protocol() -> None:
    assert set().union(*(members(part) for part in PARTS)) == members(World)
    for n, part in enumerate(PARTS):
        for other in PARTS[n + 1 :]:
            assert not members(part) & members(other), (part, other)


def test_world_wrapper_defines_every_protocol_member() -> None:
    assert uncovered(World, WorldWrapper) == set()
    assert WorldWrapper(MemoryWorld()).url == "memory://"


def test_a_protocol_method_the_wrapper_lacks_is_found() -> None:
    """The check above can fail: a protocol that gained a method shows it."""

    class Bigger(World, Protocol):
        async def tomorrow(self) -> None: ...

    assert uncovered(Bigger, WorldWrapper) == {"tomorrow"}


def test_codec_world_decides_every_protocol_member() -> None:
    overridden = set(vars(CodecWorld)) & members(World)
    assert overridden | CodecWorld.CLEAR == members(World)
    assert not overridden & CodecWorld.CLEAR, "a member cannot both carry payloads and not"
    assert members(World) >= CodecWorld.CLEAR


class _Recorder:
    """An inner world that records which method was called with what."""

    url = "recorder://"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            if name == "now":
                return datetime(2026, 1, 1, tzinfo=UTC)

            async def done() -> Any:
                return name

            return done()

        return call


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name", sorted(members(World) - {"url", "protocol_version", "gathers_writes"})
)
async def test_world_wrapper_forwards_each_method_to_the_same_one(name: str) -> None:
    inner = _Recorder()
    wrapper = WorldWrapper(inner)  # type: ignore[arg-type]
    method = getattr(wrapper, name)
    parameters = [
        p
        for p in inspect.signature(method).parameters.values()
        if p.default is inspect.Parameter.empty
    ]
    args = [object() for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    kwargs = {p.name: object() for p in parameters if p.kind is p.KEYWORD_ONLY}
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    assert [call[0] for call in inner.calls] == [name]
    forwarded = [*inner.calls[0][1], *inner.calls[0][2].values()]
    assert all(any(a is f for f in forwarded) for a in [*args, *kwargs.values()])


def test_the_example_world_is_a_wrapper() -> None:
    assert issubclass(MeteredWorld, WorldWrapper)
    assert uncovered(World, MeteredWorld) == set()
