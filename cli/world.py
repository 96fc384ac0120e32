"""``wf world``: facts about the world, and schema migration."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

import worlds
from workflow import get_retention, set_retention

from ._output import console, print_json, progress, text
from ._resolve import (
    EXIT_USAGE,
    CliError,
    WorldOption,
    execute,
    format_span,
    open_world,
    parse_span,
)
from .archives import copy_command

app = typer.Typer(
    name="world",
    help="The storage backend: what it holds, and its schema.",
    no_args_is_help=True,
)


@app.command()
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """Show the world's URL, scheme, schema version and run counts per status.

    Examples:

        wf world info

        wf world info --world sqlite:///app.db --json
    """

    async def body() -> dict[str, str | int]:
        opened = open_world(world, create=False)
        async with opened:
            return {"url": worlds.redact_url(opened.url), **await opened.info()}

    facts = execute(body)
    if as_json:
        print_json(facts)
        return
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in facts.items():
        table.add_row(text(key), text(str(value)))
    console.print(table)


@app.command()
def migrate(world: WorldOption = None) -> None:
    """Bring the world's storage schema up to date (worlds also do it on first use).

    Example:

        wf world migrate --world sqlite:///app.db
    """

    async def body() -> int:
        async with open_world(world) as opened:
            with progress() as bar:
                task = bar.add_task("migrating", total=None)
                version = await opened.migrate()
                bar.update(task, completed=1)
            return version

    version = execute(body)
    console.print(f"schema is at version {version}")


@app.command()
def retention(
    windows: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[STATUS=SPAN]...",
            help="completed=7d failed=30d ...; STATUS=none removes a window.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """Show or set how long closed runs are kept, per status.

    Workers prune the runs closed as STATUS longer ago than SPAN, in the
    background and in batches, keeping their unique claims as tombstones; a
    status with no window is kept forever, and a pinned run is never pruned.
    With no arguments, prints the windows.

    Examples:

        wf world retention completed=7d failed=30d

        wf world retention cancelled=none
    """
    changes: list[tuple[str, str]] = []
    for item in windows or []:
        status, sep, span = item.partition("=")
        if not sep or not status or not span:
            raise typer.BadParameter(f"{item!r} is not STATUS=SPAN (completed=7d)")
        changes.append((status.strip().lower(), span.strip()))

    async def body() -> dict[str, str]:
        async with open_world(world, create=False) as opened:
            for status, span in changes:
                keep = (
                    None if span.lower() in ("none", "off", "forever") else parse_span(span, status)
                )
                try:
                    await set_retention(status, keep, world=opened)
                except ValueError as exc:
                    raise CliError(str(exc), EXIT_USAGE) from None
            current = await get_retention(world=opened)
        return {status.value: format_span(keep) for status, keep in current.items()}

    shown = execute(body)
    if as_json:
        print_json(shown)
    elif not shown:
        console.print("no retention: closed runs are kept until pruned (wf runs prune)")
    else:
        for status, span in shown.items():
            console.print(f"{status}={span}")


app.command("copy")(copy_command)
