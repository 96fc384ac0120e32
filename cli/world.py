"""``wf world``: facts about the world, and schema migration."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

import worlds

from ._output import console, print_json, progress, text
from ._resolve import WorldOption, execute, open_world

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
