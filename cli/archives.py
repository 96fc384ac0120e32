"""``wf runs export``, ``wf runs import`` and ``wf world copy``: archives and moving worlds.

The commands are registered by ``cli.runs`` and ``cli.world``; they stream
through ``workflow.export_runs``, ``import_runs`` and ``copy_world``, showing
progress on stderr when it is a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

import worlds
from workflow import copy_world, export_runs, import_runs
from workflow.query import And, AttrRef, Compare, Expr, parse

from ._output import console, err_console, print_json
from ._resolve import EXIT_ERROR, CliError, WorldOption, execute, open_world, parse_pair

__all__ = ["copy_command", "export_command", "import_command"]


def _progress(what: str) -> tuple[Progress, Callable[[int, int | None], None]]:
    """A progress bar on stderr (drawn only on a terminal) and the callback that moves it."""
    bar = Progress(
        SpinnerColumn(),
        TextColumn(f"{what} "),
        BarColumn(),
        TextColumn("{task.completed:,} of {task.total} runs"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    task = bar.add_task(what, total=None)

    def moved(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    return bar, moved


def export_command(
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Export the runs this filter matches (default: all)."),
    ] = None,
    attr: Annotated[
        list[str] | None,
        typer.Option("--attr", help="Only runs with attribute KEY=VALUE (repeatable)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file (default: standard output)."),
    ] = None,
    world: WorldOption = None,
) -> None:
    """Write each matching run (record, attributes, claims, full event log) as a JSON line.

    Payloads are written as the world stores them (a codec world's stay
    encoded). `wf runs import` restores the file into any world; `replay()`
    takes one of its lines as a history.

    Examples:

        wf runs export --query "status = 'completed'" -o completed.jsonl

        wf runs export --attr customer=c-9 > c-9.jsonl
    """

    async def body() -> int:
        pairs = [parse_pair(item) for item in attr or []]
        terms: list[Expr] = [Compare(AttrRef(key), "=", value) for key, value in pairs]
        if query is not None:
            terms.append(parse(query))  # a malformed query: exit 2, before anything is written
        where = None if not terms else terms[0] if len(terms) == 1 else And(tuple(terms))
        async with open_world(world, create=False) as opened:
            bar, moved = _progress("exporting")
            with bar:
                if output is None:
                    return await export_runs(where, sys.stdout.buffer, world=opened, progress=moved)
                with output.open("wb") as fp:
                    return await export_runs(where, fp, world=opened, progress=moved)

    count = execute(body)
    if output is not None:
        console.print(f"exported {count:,} run(s) to {output}")


def import_command(
    file: Annotated[Path, typer.Argument(help="A file `wf runs export` wrote.", exists=True)],
    world: WorldOption = None,
) -> None:
    """Restore the runs of an export into this world, their ids kept.

    Refused, with nothing written, if the world already holds one of the runs
    (or one of their unique pairs or hook tokens). Open runs carry on once a
    worker serves the world.

    Example:

        wf runs import completed.jsonl --world postgresql://db/app
    """

    async def body() -> int:
        async with open_world(world) as opened:
            bar, moved = _progress("importing")
            with bar, file.open("rb") as fp:
                return await import_runs(fp, world=opened, progress=moved)

    count = execute(body)
    console.print(f"imported {count:,} run(s) from {file}")


def copy_command(
    src: Annotated[str, typer.Argument(help="The world to copy, e.g. sqlite:///app.db.")],
    dst: Annotated[str, typer.Argument(help="An empty world, e.g. postgresql://db/app.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
) -> None:
    """Copy everything world SRC holds into the empty world DST.

    Runs open and closed with their logs, attributes, claims (generations
    kept), tombstones, slots and waiters, rate tokens, hooks and unread
    payloads, streams, schedules and settings. Leases and registered workers
    are not copied: work leased in SRC is due at once in DST. Stop SRC's
    workers first, copy, then start them on DST. Refuses a DST that holds
    anything; counts what DST holds at the end.

    Example:

        wf world copy sqlite:///.workflow/world.db postgresql://db/app
    """

    async def body() -> dict[str, int]:
        source = open_world(src, create=False)
        target = open_world(dst)
        bar, moved = _progress("copying")
        with bar:
            try:
                return await copy_world(source, target, progress=moved)
            except RuntimeError as exc:  # the counts differ: say so, no traceback
                raise CliError(str(exc), EXIT_ERROR) from None

    counts = execute(body)
    if as_json:
        print_json({"src": worlds.redact_url(src), "dst": worlds.redact_url(dst), **counts})
        return
    shown = ", ".join(f"{count:,} {kind}" for kind, count in counts.items())
    console.print(f"copied {shown or 'nothing'}; counts verified in {worlds.redact_url(dst)}")
