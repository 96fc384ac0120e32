"""``wf runs``: list, show, events, stream, cancel, retry, fork and prune runs."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer

from workflow import RunStatus, list_runs, prune_runs
from workflow.query import And, AttrRef, Compare, Expr, parse

from ._codec_option import CodecOption, note_codec, with_codec
from ._output import (
    console,
    err_console,
    event_to_json,
    markup_safe,
    print_json,
    progress,
    run_to_json,
    runs_table,
)
from ._resolve import (
    EXIT_USAGE,
    CliError,
    WorldOption,
    execute,
    open_world,
    parse_pair,
    parse_time,
    resolve_run,
)
from ._show import EVENTS_SHOWN, EventWindow, gather_details, render_details

app = typer.Typer(
    name="runs",
    help="Find, inspect, follow, cancel, retry, fork and prune runs.",
    no_args_is_help=True,
)

RunArgument = Annotated[
    str,
    typer.Argument(
        metavar="RUN",
        help="A run id, a $name value, or a unique KEY=VALUE (like order=o-17).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _statuses(values: list[str]) -> list[RunStatus] | None:
    if not values:
        return None
    known = [status.value for status in RunStatus]
    chosen = []
    for value in values:
        for part in value.split(","):
            if part.strip().lower() not in known:
                raise CliError(f"--status {part!r} is not one of {', '.join(known)}", EXIT_USAGE)
            chosen.append(RunStatus(part.strip().lower()))
    return chosen


@app.command("list")
def list_command(
    status: Annotated[
        list[str], typer.Option("--status", "-s", help="Only these statuses (repeatable).")
    ] = [],  # noqa: B006 - typer reads the default, never mutates it
    workflow: Annotated[str | None, typer.Option("--workflow", "-w", help="Workflow name.")] = None,
    attr: Annotated[
        list[str],
        typer.Option("--attr", "-a", help="KEY=VALUE the run must have (repeatable, AND)."),
    ] = [],  # noqa: B006
    since: Annotated[
        str | None, typer.Option(help="Created at or after: ISO time or an age (2h, 30m, 7d).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Created before: ISO time or an age.")] = None,
    query: Annotated[
        str | None,
        typer.Option("--query", "-q", help="Filter expression: \"tier > 1 AND region = 'eu'\"."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Runs per page.")] = 50,
    cursor: Annotated[str | None, typer.Option(help="Continue from a previous page.")] = None,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """List runs, newest first, filtered by status, workflow, time, attributes or a query.

    --attr KEY=VALUE given twice with one KEY means both (AND), so no run
    matches two different values. With --json, stdout is one object:
    {"runs": [...], "next_cursor": "..." or null}; pass next_cursor back as
    --cursor for the next page. Results are left out (has_result says if
    there is one): wf runs show prints them.

    Examples:

        wf runs list --status failed --since 2h

        wf runs list --attr customer=c-9 --attr tier=2 --json

        wf runs list --query "status IN ('failed', 'cancelled') AND region STARTS_WITH 'eu'"
    """

    async def body() -> None:
        statuses = _statuses(status)
        created_after = parse_time(since, "--since") if since else None
        created_before = parse_time(until, "--until") if until else None
        where = parse(query) if query is not None else None
        attributes: dict[str, Any] = {}
        also: list[Expr] = []  # a key given again: AND, so the run must have both values
        for key, value in (parse_pair(item) for item in attr):
            if key in attributes:
                also.append(Compare(AttrRef(key), "=", value))
            else:
                attributes[key] = value
        terms = [*also, *([where] if where is not None else [])]
        if terms:
            where = terms[0] if len(terms) == 1 else And(tuple(terms))
        async with open_world(world, create=False) as opened:
            page = await list_runs(
                workflow=workflow,
                status=list(statuses) if statuses is not None else None,
                attributes=attributes,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                cursor=cursor,
                query=where,
                world=opened,
            )
        records = [run.record for run in page if run.record is not None]
        if as_json:
            print_json(
                {
                    "runs": [run_to_json(record, result=False) for record in records],
                    "next_cursor": page.next_cursor,
                }
            )
            return
        if records:
            console.print(runs_table(records))
        else:
            err_console.print("no runs match")
        if page.next_cursor:
            err_console.print(f"more runs: --cursor {markup_safe(page.next_cursor)}")

    execute(body)


@app.command()
def show(
    run: RunArgument,
    events: Annotated[
        str | None,
        typer.Option(
            "--events",
            metavar="all|A-B",
            help=f"Timeline events to print: all, or seqs A-B (A-, -B). Default: a log "
            f"longer than {2 * EVENTS_SHOWN + 10} events shows its first and last "
            f"{EVENTS_SHOWN}.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Show a run: status, result or error, attributes with claim generations, steps,
    hooks and a timeline.

    A long event log is cut to its two ends (say which events with --events);
    with --json, events_total and events_omitted say what was left out.

    Examples:

        wf runs show 01J8ZK3V6Q9T0X2N4B7C5D1E8F

        wf runs show order=o-17 --json

        wf runs show order=o-17 --events 100-200
    """

    async def body() -> None:
        try:
            window = EventWindow.parse(events)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        async with with_codec(open_world(world, create=False), codec) as opened:
            target = await resolve_run(opened, run)
            details = await gather_details(target, window)
            await note_codec(opened, codec)
        if as_json:
            print_json(details.to_json())
        else:
            render_details(details)

    execute(body)


@app.command()
def events(
    run: RunArgument,
    seqs: Annotated[
        str | None,
        typer.Option(
            "--range",
            metavar="A-B",
            help="Only events with these seqs: A-B, A- or -B (default: all).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Print a run's event log, in order (payloads decoded from msgpack).

    Examples:

        wf runs events my-run-name

        wf runs events order=o-17 --json | jq '.[].kind'

        wf runs events order=o-17 --range 100-200
    """

    async def body() -> None:
        try:
            window = EventWindow.parse(seqs or "all")
        except ValueError as exc:
            raise CliError(str(exc).replace("--events", "--range"), EXIT_USAGE) from None
        async with with_codec(open_world(world, create=False), codec) as opened:
            target = await resolve_run(opened, run)
            log, _ = window.select(await target.events())
            await note_codec(opened, codec)
        rows = [event_to_json(event) for event in log]
        if as_json:
            print_json(rows)
            return
        for row in rows:
            fields = " ".join(
                f"{key}={_short(value)}"
                for key, value in row.items()
                if key not in ("kind", "seq", "at")
            )
            console.print(
                f"[dim]{row['seq']:>4}[/] {markup_safe(row['at'])} [bold]{row['kind']}[/] "
                f"{markup_safe(fields)}"
            )

    execute(body)


def _short(value: object, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command()
def cancel(
    run: RunArgument,
    reason: Annotated[str | None, typer.Option(help="Recorded in the run's log.")] = None,
    grace: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds the workflow may spend cleaning up [default: 30]; not with --now.",
            show_default=False,
        ),
    ] = None,
    now: Annotated[
        bool, typer.Option("--now", help="Close the run at once, with no cleanup.")
    ] = False,
    world: WorldOption = None,
) -> None:
    """Cancel a run: no new step starts and in-flight steps are told to stop.

    The workflow may catch the cancellation once and run cleanup steps for
    up to --grace seconds (status: cancelling); --now closes it at once.
    Cancelling a closed run changes nothing and says so.

    Examples:

        wf runs cancel order=o-17 --reason "customer asked"

        wf runs cancel 01J9Z6K6Z2EPV5G0C3R8F4M9AN --now
    """

    async def body() -> None:
        if now and grace is not None:
            raise CliError(
                "--now closes the run at once with no cleanup, so --grace cannot apply: pass one",
                EXIT_USAGE,
            )
        async with open_world(world, create=False) as opened:
            target = await resolve_run(opened, run)
            before = await target.status()
            await target.cancel(reason, grace=None if now else (30.0 if grace is None else grace))
            after = await target.status()
        if before.is_closed:
            console.print(f"run {target.id} was already {before.value}; nothing to cancel")
        else:
            console.print(f"cancelled run {target.id} (was {before.value}, now {after.value})")

    execute(body)


@app.command()
def stream(
    run: RunArgument,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The stream's name.")],
    start: Annotated[
        int, typer.Option(min=0, help="The offset to start from (chunks count from 0).")
    ] = 0,
    follow: Annotated[
        bool, typer.Option("--follow/--no-follow", help="Wait for new chunks until the run closes.")
    ] = True,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Print a run's stream NAME (write_stream), one JSON value per line.

    Follows it live until the run closes; --start N resumes after N chunks.

    Examples:

        wf runs stream order=o-17 progress

        wf runs stream 01J9Z6K6Z2EPV5G0C3R8F4M9AN progress --start 120 --no-follow
    """

    async def body() -> None:
        async with with_codec(open_world(world, create=False), codec) as opened:
            target = await resolve_run(opened, run)
            async for value in target.stream(name, start, follow=follow):
                line = json.dumps(value, ensure_ascii=True, default=str)
                typer.echo(line)

    execute(body)


@app.command()
def retry(run: RunArgument, world: WorldOption = None) -> None:
    """Reopen a failed or cancelled run: same id, recorded steps kept, the failed
    steps run again. The run's log records who reopened it. A run with limited
    pairs (Limited, hold()) takes its slots again first: while one is not free it
    waits, pending, in line like any other run.

    Examples:

        wf runs retry order=o-17
    """

    async def body() -> tuple[str, RunStatus]:
        async with open_world(world, create=False) as opened:
            target = await resolve_run(opened, run)
            await target.retry()
            return target.id, await target.status()

    run_id, status = execute(body)
    waits = ""
    if status is RunStatus.PENDING:
        waits = " (pending: it waits for a slot; wf runs show says which)"
    console.print(f"reopened run {run_id}{waits}")


@app.command()
def fork(
    run: RunArgument,
    from_step: Annotated[
        int,
        typer.Option(
            "--from-step", min=1, help="The step the new run runs anew.", show_default=False
        ),
    ],
    world: WorldOption = None,
) -> None:
    """Start a new run that replays RUN's log up to step N and runs step N on.

    RUN is left as it is; the new run's log records what it was forked from and by whom.

    Examples:

        wf runs fork order=o-17 --from-step 3
    """

    async def body() -> str:
        async with open_world(world, create=False) as opened:
            target = await resolve_run(opened, run)
            forked = await target.fork(from_step)
            return forked.id

    console.print(f"forked run {run} from step {from_step}: new run {execute(body)}")


@app.command()
def prune(
    before: Annotated[
        str,
        typer.Option(
            "--before",
            help="Delete runs that closed before this: ISO time or an age (7d = a week ago).",
            show_default=False,
        ),
    ],
    batch: Annotated[int, typer.Option(min=1, max=10000, help="Runs deleted per step.")] = 500,
    release_claims: Annotated[
        bool,
        typer.Option(
            "--release-claims",
            help="Release the pruned runs' unique claims instead of keeping tombstones, "
            "and every tombstone earlier prunes kept.",
        ),
    ] = False,
    as_json: JsonOption = False,
    world: WorldOption = None,
) -> None:
    """Delete closed runs (events, attributes, work) that closed before WHEN.

    Their unique claims stay as tombstones (a later start of such a pair is
    still refused) unless --release-claims, which frees those pairs and the
    tombstones of earlier prunes (`wf attributes release KEY VALUE` frees one).
    Claims whose ttl lapsed are released either way. Open runs are never pruned.

    Examples:

        wf runs prune --before 30d

        wf runs prune --before 2024-01-01T00:00:00Z --json
    """

    async def body() -> tuple[datetime, list[str]]:
        cutoff = parse_time(before, "--before")
        pruned: list[str] = []
        async with open_world(world, create=False) as opened:
            with progress() as bar:
                task = bar.add_task("pruning runs", total=None)
                while True:
                    ids = await prune_runs(
                        closed_before=cutoff,
                        limit=batch,
                        release_claims=release_claims,
                        world=opened,
                    )
                    pruned += ids
                    bar.update(task, completed=len(pruned))
                    if len(ids) < batch:
                        break
        return cutoff, pruned

    cutoff, pruned = execute(body)
    if as_json:
        print_json({"pruned": len(pruned), "ids": pruned, "closed_before": cutoff})
    else:
        console.print(f"pruned {len(pruned)} run(s) closed before {cutoff.isoformat()}")
