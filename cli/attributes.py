"""``wf attributes``: which attribute keys runs carry, which values a key takes,
and who holds a pair.

The world protocol has no key index to ask, so ``keys`` and ``values`` page
through ``list_runs`` (narrowed by the usual filters) and count what they see,
with progress on stderr. ``--max-runs`` bounds the scan on a large world.
``holders`` asks the world for one pair's unique claim and its limited slots;
``release`` frees a pair a pruned (or closed) run still holds (``release_claims``).
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer
from rich.table import Table

from workflow import find_run, list_runs, release_claims
from workflow.query import AttrRef, Expr, IsNull, parse
from worlds import World
from worlds.types import AttributeValue, Claim, RunRecord

from ._output import console, err_console, format_value, markup_safe, print_json, progress, text
from ._resolve import WorldOption, execute, open_world, parse_value, usage_errors

app = typer.Typer(
    name="attributes",
    help="Attribute keys and values in use (indexed run metadata).",
    no_args_is_help=True,
)

QueryOption = Annotated[
    str | None, typer.Option("--query", "-q", help="Only runs matching this filter expression.")
]
MaxRunsOption = Annotated[
    int, typer.Option(min=1, help="Scan at most this many runs (newest first).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
KeyArgument = Annotated[str, typer.Argument(help="The attribute key.", show_default=False)]
ValueArgument = Annotated[
    str,
    typer.Argument(
        help="The value (JSON numbers, true/false/null as such; else text).", show_default=False
    ),
]


async def _scan(world: World, where: Expr | None, max_runs: int) -> tuple[list[RunRecord], bool]:
    """Up to ``max_runs`` runs matching ``where``, newest first; True if more remain."""
    found: list[RunRecord] = []
    cursor: str | None = None
    with progress() as bar:
        task = bar.add_task("scanning runs", total=None)
        while len(found) < max_runs:
            page = await list_runs(
                query=where, limit=min(500, max_runs - len(found)), cursor=cursor, world=world
            )
            found += [run.record for run in page if run.record is not None]
            bar.update(task, completed=len(found))
            cursor = page.next_cursor
            if cursor is None:
                return found, False
    return found, True


def _note_truncated(truncated: bool, max_runs: int) -> None:
    if truncated:
        err_console.print(f"counted the newest {max_runs} runs only; raise --max-runs for more")


@app.command()
def keys(
    query: QueryOption = None,
    max_runs: MaxRunsOption = 100_000,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """List attribute keys and how many runs carry each.

    Examples:

        wf attributes keys

        wf attributes keys --query "status = 'failed'" --json
    """

    async def body() -> None:
        where = parse(query) if query else None
        async with open_world(world, create=False) as opened:
            runs, truncated = await _scan(opened, where, max_runs)
        counts = Counter(key for run in runs for key in run.attributes)
        rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if as_json:
            print_json([{"key": key, "runs": count} for key, count in rows])
        else:
            table = Table(box=None, header_style="bold")
            table.add_column("KEY")
            table.add_column("RUNS", justify="right")
            for key, count in rows:
                table.add_row(text(key), str(count))
            console.print(table if rows else "no attributes")
        _note_truncated(truncated, max_runs)

    execute(body)


@app.command()
def values(
    key: Annotated[str, typer.Argument(help="The attribute key.", show_default=False)],
    query: QueryOption = None,
    max_runs: MaxRunsOption = 100_000,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """List the values attribute KEY takes and how many runs have each.

    Examples:

        wf attributes values customer

        wf attributes values region --query "status = 'running'" --json
    """

    async def body() -> None:
        present: Expr = IsNull(AttrRef(key), negated=True)
        where = present
        if query:
            where = parse(f"({query}) AND attributes.`{key.replace('`', '``')}` IS NOT NULL")
        async with open_world(world, create=False) as opened:
            runs, truncated = await _scan(opened, where, max_runs)
        counts: Counter[tuple[str, str]] = Counter()
        originals: dict[tuple[str, str], Any] = {}
        for run in runs:
            value = run.attributes.get(key)
            marker = (type(value).__name__, format_value(value))
            counts[marker] += 1
            originals[marker] = value
        rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if as_json:
            print_json([{"value": originals[marker], "runs": n} for marker, n in rows])
        else:
            table = Table(box=None, header_style="bold")
            table.add_column("VALUE")
            table.add_column("TYPE")
            table.add_column("RUNS", justify="right")
            for (kind, shown), count in rows:
                table.add_row(text(shown), kind, str(count))
            console.print(table if rows else f"no run has attribute {markup_safe(repr(key))}")
        _note_truncated(truncated, max_runs)

    execute(body)


@app.command()
def holders(
    key: KeyArgument,
    value: ValueArgument,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """Who holds the pair KEY=VALUE: its unique claim (with generation, and whether the
    holder was pruned) and, for a limited pair (Limited at start, or hold() in
    workflow code), the runs holding its slots and the runs waiting for one, in
    the order they will be promoted; a hold() block shows its number.

    Examples:

        wf attributes holders tenant acme

        wf attributes holders order o-17 --json
    """

    async def body() -> None:
        parsed = parse_value(value)
        async with open_world(world, create=False) as opened:
            with usage_errors():  # a key or value no run can hold is a usage error
                await find_run(key, parsed, world=opened)
            claim = await opened.find_claim(key, parsed)
            slots = await opened.list_slots(key, parsed)
        holding = [slot for slot in slots if slot.holding]
        waiting = [slot for slot in slots if not slot.holding]
        limit = max((slot.limit for slot in holding), default=None)
        if as_json:
            print_json(
                {
                    "key": key,
                    "value": parsed,
                    "claim": None
                    if claim is None
                    else {
                        "run_id": claim.run_id,
                        "generation": claim.generation,
                        "step": claim.step,
                        "pruned_status": claim.pruned_status,
                        "lapses_at": claim.lapses_at,
                    },
                    "limit": limit,
                    "holders": [slot.run_id for slot in holding],
                    "waiters": [slot.run_id for slot in waiting],
                    "holds": {slot.run_id: slot.hold for slot in slots if slot.hold},
                }
            )
            return
        shown = f"{markup_safe(key)}={markup_safe(format_value(parsed))}"
        if claim is not None:
            note = f", pruned ({claim.pruned_status})" if claim.pruned_status else ""
            lapses = f", lapses {claim.lapses_at.isoformat()}" if claim.lapses_at else ""
            console.print(
                f"unique claim: run {claim.run_id} (generation {claim.generation}{note}{lapses})"
            )
        if slots:
            console.print(f"{shown}: {len(holding)} of {limit or '?'} slots held")
            table = Table(box=None, header_style="bold")
            for column in ("#", "RUN", "STATE", "LIMIT"):
                table.add_column(column)
            for n, slot in enumerate([*holding, *waiting], 1):
                state = "holding" if slot.holding else "waiting"
                if slot.hold > 0:
                    state += f" (hold {slot.hold})"
                elif slot.hold < 0:  # a reopened or forked run taking its slots again
                    state += " (to go on)"
                table.add_row(str(n), slot.run_id, state, str(slot.limit))
            console.print(table)
        if claim is None and not slots:
            console.print(f"nobody holds {shown}")

    execute(body)


@app.command()
def release(
    key: KeyArgument,
    value: ValueArgument,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """Release the unique pair KEY=VALUE held by a pruned run (a tombstone) or a closed one.

    The pair may then be claimed again, one generation up. A pair a pending or
    running run holds is not released (exit 1): cancel that run first.
    `wf runs prune --release-claims` releases every tombstone at once.

    Examples:

        wf attributes release order o-17

        wf attributes release order o-17 --json
    """

    async def body() -> tuple[AttributeValue, Claim | None]:
        parsed = parse_value(value)
        async with open_world(world, create=False) as opened:
            return parsed, await release_claims(key, parsed, world=opened)

    parsed, claim = execute(body)
    if as_json:
        released = None
        if claim is not None:
            released = {
                "run_id": claim.run_id,
                "generation": claim.generation,
                "pruned_status": claim.pruned_status,
            }
        print_json({"key": key, "value": parsed, "released": released})
        return
    shown = f"{markup_safe(key)}={markup_safe(format_value(parsed))}"
    if claim is None:
        console.print(f"nobody holds {shown}: nothing to release")
        return
    held = (
        f"pruned run {claim.run_id} ({claim.pruned_status})"
        if claim.pruned_status
        else f"closed run {claim.run_id}"
    )
    console.print(
        f"released {shown} (held by {held}, generation {claim.generation}); "
        f"its next holder gets generation {claim.generation + 1}"
    )
