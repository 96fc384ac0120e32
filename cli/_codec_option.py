"""``--codec MODULE:NAME``: the payload codec a command passes payloads through.

It is one option, defined here, for every command that
writes or reads payloads (``wf worker``, ``wf start``, ``wf hooks resume``, ...):
the world it opens passes every payload through the codec
(``worlds.codec.CodecWorld``), as the application's own processes do.
"""

from __future__ import annotations

from typing import Annotated

import typer

from worlds.codec import CODEC_SETTING, CodecWorld, PayloadCodec
from worlds.protocol import World
from worlds.quoting import quoted

from ._modules import load_module
from ._resolve import EXIT_USAGE, CliError

__all__ = ["CodecOption", "load_codec", "note_codec", "with_codec"]

CodecOption = Annotated[
    str | None,
    typer.Option(
        "--codec",
        metavar="MODULE:NAME",
        help="A payload codec (encode/decode of bytes), or a class or function returning"
        " one: payloads pass through it on their way to and from the world. Give every"
        " process of a codec world the same codec.",
        show_default=False,
    ),
]


def with_codec(world: World, spec: str | None) -> World:
    """``world``, through the codec ``spec`` names when one is given."""
    return world if spec is None else CodecWorld(world, load_codec(spec))


async def note_codec(world: World, spec: str | None) -> None:
    """Say on stderr which codec ``world``'s payloads need, if it records one and
    ``spec`` (``--codec``) gave none: they show as ``{"encoded": ...}``."""
    if spec is not None:
        return
    recorded = await world.setting(CODEC_SETTING)
    if recorded is not None:
        typer.echo(
            f"note: this world's payloads are encoded with the codec {recorded!r}; pass"
            " --codec MODULE:NAME to read them",
            err=True,
        )


def load_codec(spec: str) -> PayloadCodec:
    """The codec ``MODULE:NAME`` names (calling NAME if it is a class or function)."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise CliError(
            f"--codec {quoted(spec)}: expected MODULE:NAME (e.g. myapp.crypto:codec)", EXIT_USAGE
        )
    found = getattr(load_module(module), name, None)
    if found is None:
        raise CliError(
            f"--codec {quoted(spec)}: {quoted(module)} has no {quoted(name)}", EXIT_USAGE
        )
    if isinstance(found, type) or (callable(found) and not isinstance(found, PayloadCodec)):
        found = found()
    if not isinstance(found, PayloadCodec):
        raise CliError(
            f"--codec {quoted(spec)} is not a payload codec: it needs encode(bytes) and "
            "decode(bytes)",
            EXIT_USAGE,
        )
    return found
