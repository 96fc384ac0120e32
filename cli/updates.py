"""``wf runs update``: send an update to a run from a shell and print the workflow's reply."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._codec_option import CodecOption, with_codec
from ._output import print_json
from ._resolve import (
    EXIT_USAGE,
    CliError,
    WorldOption,
    execute,
    open_world,
    parse_payload,
    resolve_run,
)

__all__ = ["update_command"]


def update_command(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="A run id, a $name value, or a unique KEY=VALUE (like cart=c-9).",
            show_default=False,
        ),
    ],
    name: Annotated[str, typer.Argument(help="The update's name (receive_updates(NAME)).")],
    payload: Annotated[str, typer.Argument(help="The payload, a JSON value.")],
    update_id: Annotated[
        str | None,
        typer.Option("--id", help="Deliver once per id; a retry prints the recorded reply."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=0, help="Seconds to wait for the reply [default: no limit].", show_default=False
        ),
    ] = None,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Send update NAME with PAYLOAD (a JSON value) to RUN; print the reply as JSON.

    A rejection, or a run that is closed or closes before replying, is an error
    (exit 1) saying why.

    Examples:

        wf runs update cart=c-9 add '{"sku": "apple"}'

        wf runs update 01J9Z6K6Z2EPV5G0C3R8F4M9AN approve true --id req-17
    """

    async def body() -> Any:
        value = parse_payload(payload)
        async with with_codec(open_world(world, create=False), codec) as opened:
            target = await resolve_run(opened, run)
            try:
                return await target.update(name, value, update_id=update_id, timeout=timeout)
            except (ValueError, TypeError) as exc:  # the arguments: checked before any write
                raise CliError(str(exc), EXIT_USAGE) from None

    print_json(execute(body))
