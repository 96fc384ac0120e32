"""The bulk forms of ``wf runs cancel|retry|prune``: by query, confirmed, with progress.

Each counts the runs its filter matches and prints the count, lists them with
``--dry-run`` (and stops), asks for confirmation unless ``--yes``, then runs
the bulk action (``cancel_runs``, ``retry_runs``, ``prune_runs(query=...)``:
a durable ``$bulk`` run this command drives itself) with a progress bar on a
terminal, and ends with a count line: ``cancelled 1,204 of 1,204; 0 failed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from workflow import BulkResult, list_runs
from workflow.query import And, AttrRef, Compare, Expr, FieldRef, IsNull, parse
from worlds.protocol import World
from worlds.types import RunRecord

from ._output import console, err_console, markup_safe, print_json, runs_table
from ._resolve import EXIT_USAGE, CliError, open_world, parse_pair

__all__ = [
    "AttrOption",
    "DryRunOption",
    "QueryOption",
    "YesOption",
    "bulk_action",
    "prune_filter",
    "where_of",
]

QueryOption = Annotated[
    str | None,
    typer.Option(
        "--query",
        "-q",
        help="Act on every run this filter matches (as wf runs list --query), not one RUN.",
    ),
]
AttrOption = Annotated[
    list[str],
    typer.Option("--attr", "-a", help="KEY=VALUE the runs must have (repeatable, AND)."),
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="List the matching runs and change nothing.")
]

_SHOWN = 1000
"""Runs a dry run lists (it counts them all)."""


def where_of(query: str | None, attr: list[str]) -> Expr | None:
    """The filter of ``--query`` ANDed with every ``--attr KEY=VALUE``; None if neither."""
    terms: list[Expr] = [Compare(AttrRef(k), "=", v) for k, v in map(parse_pair, attr)]
    if query is not None:
        terms.append(parse(query))
    if not terms:
        return None
    return terms[0] if len(terms) == 1 else And(tuple(terms))


def prune_filter(where: Expr, closed_before: datetime | None) -> Expr:
    """What ``prune_runs(query=where, closed_before=...)`` acts on: closed runs only."""
    terms: list[Expr] = [IsNull(FieldRef("closed_at"), negated=True)]
    if closed_before is not None:
        terms.append(Compare(FieldRef("closed_at"), "<", closed_before))
    return And((*terms, where))


async def _matching(world: World, where: Expr) -> tuple[int, list[RunRecord]]:
    count, cursor = 0, None
    shown: list[RunRecord] = []
    while True:
        page = await list_runs(query=where, limit=1000, cursor=cursor, world=world)
        count += len(page)
        shown += [r.record for r in page if r.record is not None][: _SHOWN - len(shown)]
        if (cursor := page.next_cursor) is None:
            return count, shown


async def bulk_action(
    url: str | None,
    where: Expr,
    *,
    verb: str,
    past: str,
    act: Callable[[World, Callable[[int], None]], Awaitable[BulkResult]],
    yes: bool,
    dry_run: bool,
    as_json: bool = False,
) -> None:
    """In the world at ``url``: count, list or confirm, then ``act(world, on_progress)``
    and print the count line (``verb``: cancel, ``past``: cancelled)."""
    async with open_world(url, create=False) as world:
        await _act(world, where, verb, past, act, yes=yes, dry_run=dry_run, as_json=as_json)


async def _act(
    world: World,
    where: Expr,
    verb: str,
    past: str,
    act: Callable[[World, Callable[[int], None]], Awaitable[BulkResult]],
    *,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    count, shown = await _matching(world, where)
    if dry_run:
        if as_json:
            print_json({"matched": count, "runs": [r.id for r in shown]})
            return
        if shown:
            console.print(runs_table(shown))
        more = f" (the first {len(shown)} listed)" if count > len(shown) else ""
        console.print(f"{count:,} run(s) match{more}; dry run: nothing was {past}")
        return
    err_console.print(f"{count:,} run(s) match")
    if count == 0:
        console.print(f"{past} 0 of 0; 0 failed")
        return
    if not yes and not typer.confirm(f"{verb.capitalize()} them?", err=True):
        raise CliError(f"aborted: nothing was {past}", EXIT_USAGE)
    bar = Progress(
        TextColumn(f"{verb} runs"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    with bar:
        task = bar.add_task(verb, total=count)
        result = await act(world, lambda n: bar.advance(task, n))
    if as_json:
        print_json(
            {
                "matched": result.matched,
                "done": result.done,
                "failed": result.failed,
                "errors": [{"run_id": e.run_id, "message": e.message} for e in result.errors],
                "bulk_run_id": result.run_id,
            }
        )
        return
    for error in result.errors:
        err_console.print(f"  {markup_safe(error.message)}")
    if result.failed > len(result.errors):
        err_console.print(f"  ... and {result.failed - len(result.errors):,} more")
    console.print(f"{past} {result.done:,} of {result.matched:,}; {result.failed:,} failed")
