"""``wf schedules``: list, inspect, pause, trigger, backfill and delete schedules.

Schedules are created in code (``workflow.schedules.create_schedule``) and
fired by workers; this group manages them from a shell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from workflow.schedules import Overlap, Schedule, ScheduleInfo, get_schedule, list_schedules

from ._codec_option import CodecOption, with_codec
from ._output import attributes_text, console, format_value, print_json, text, visible
from ._resolve import EXIT_USAGE, CliError, WorldOption, execute, open_world, parse_time

app = typer.Typer(
    name="schedules",
    help="Schedules: workflows started on a cron expression or an interval.",
    no_args_is_help=True,
)

IdArgument = Annotated[str, typer.Argument(help="The schedule's id.", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _when(info: ScheduleInfo) -> str:
    if info.cron is not None:
        return f"cron {info.cron} ({info.timezone})"
    assert info.every is not None
    return f"every {info.every.total_seconds():g}s"


def _to_json(info: ScheduleInfo, *, runs: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": info.id,
        "workflow": info.workflow,
        "cron": info.cron,
        "timezone": info.timezone,
        "every_seconds": None if info.every is None else info.every.total_seconds(),
        "overlap": info.overlap.value,
        "catchup_window_seconds": info.catchup_window.total_seconds(),
        "attributes": info.attributes,
        "key": info.key,
        "value": info.value,
        "paused": info.paused,
        "note": info.note,
        "next_fire_times": info.next_fire_times,
        "buffered_at": info.buffered_at,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
    }
    if runs:
        data["recent_run_ids"] = info.recent_run_ids
    return data


def _check_id(schedule_id: str, world: Any) -> Schedule:
    try:
        return get_schedule(schedule_id, world=world)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


@app.command("list")
def list_command(as_json: JsonOption = False, world: WorldOption = None) -> None:
    """List schedules: id, workflow, when it fires, overlap rule, paused, next fire.

    Examples:

        wf schedules list

        wf schedules list --json
    """

    async def body() -> list[ScheduleInfo]:
        async with open_world(world, create=False) as opened:
            found = [s.info async for s in list_schedules(world=opened)]
            return [info for info in found if info is not None]

    infos = execute(body)
    if as_json:
        print_json([_to_json(info, runs=False) for info in infos])
        return
    rows = [
        (
            text(info.id),
            text(info.workflow),
            text(_when(info)),
            Text(info.overlap.value),
            text("paused" if info.paused else "active", "yellow" if info.paused else "green"),
            Text(info.next_fire_times[0].isoformat() if info.next_fire_times else "-"),
        )
        for info in infos
    ]
    console.print(_list_table(rows) if rows else "no schedules")


_LIST_COLUMNS = ("id", "workflow", "fires", "overlap", "state", "next fire (UTC)")
_WHOLE = frozenset({"id", "state", "next fire (UTC)"})
"""Never cut or folded: people copy ids and fire times (the others fold instead)."""
_FOLDED_MIN = 8
"""The narrowest a folding column gets before the table turns into records."""


def _list_table(rows: Sequence[tuple[Text, ...]]) -> Table:
    """The schedules as a table, or, where its whole columns and a few characters
    of the others do not fit the terminal, as one block of ``name value`` lines
    per schedule: either way every id and fire time is printed whole."""
    whole = sum(
        max(len(column), *(row[index].cell_len for row in rows))
        for index, column in enumerate(_LIST_COLUMNS)
        if column in _WHOLE
    )
    folded = _FOLDED_MIN * (len(_LIST_COLUMNS) - len(_WHOLE))
    if whole + folded + 2 * len(_LIST_COLUMNS) <= console.width:
        table = Table(box=None)
        for column in _LIST_COLUMNS:
            if column in _WHOLE:
                table.add_column(column, no_wrap=True)
            else:
                table.add_column(column, overflow="fold", min_width=_FOLDED_MIN)
        for row in rows:
            table.add_row(*row)
        return table
    records = Table(box=None, show_header=False)
    records.add_column(style="bold", no_wrap=True)
    records.add_column(overflow="fold")
    for number, row in enumerate(rows):
        if number:
            records.add_row("", "")
        for column, cell in zip(_LIST_COLUMNS, row, strict=True):
            records.add_row(column, cell)
    return records


@app.command("show")
def show_command(
    schedule: IdArgument, as_json: JsonOption = False, world: WorldOption = None
) -> None:
    """Show one schedule: its definition, state, next fire times and newest runs.

    Examples:

        wf schedules show daily-report

        wf schedules show daily-report --json
    """

    async def body() -> ScheduleInfo:
        async with open_world(world, create=False) as opened:
            return await _check_id(schedule, opened).describe()

    info = execute(body)
    if as_json:
        print_json(_to_json(info))
        return
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    state = "paused" if info.paused else "active"
    rows: list[tuple[str, str]] = [
        ("id", info.id),
        ("workflow", info.workflow),
        ("fires", _when(info)),
        ("overlap", info.overlap.value),
        ("catchup window", f"{info.catchup_window.total_seconds():g}s"),
        ("state", state + (f" ({info.note})" if info.note else "")),
        ("attributes", attributes_text(info.attributes) or "-"),
        (
            "shared pair",
            f"{info.key}={format_value(info.value)}" if info.key is not None else "-",
        ),
        ("buffered fire", info.buffered_at.isoformat() if info.buffered_at else "-"),
        ("next fires (UTC)", "\n".join(t.isoformat() for t in info.next_fire_times) or "-"),
        ("recent runs", "\n".join(info.recent_run_ids) or "-"),
    ]
    for name, value in rows:
        table.add_row(name, Text(visible(value, keep_newlines=True)))
    console.print(table)


@app.command("pause")
def pause_command(
    schedule: IdArgument,
    note: Annotated[str | None, typer.Option("--note", help="Why it is paused.")] = None,
    world: WorldOption = None,
) -> None:
    """Stop a schedule firing until it is unpaused.

    Examples:

        wf schedules pause daily-report --note "warehouse migration"
    """

    async def body() -> None:
        async with open_world(world, create=False) as opened:
            await _check_id(schedule, opened).pause(note=note)

    execute(body)
    console.print(f"paused schedule {text(schedule)}")


@app.command("unpause")
def unpause_command(
    schedule: IdArgument,
    note: Annotated[str | None, typer.Option("--note", help="A note to keep.")] = None,
    world: WorldOption = None,
) -> None:
    """Fire a paused schedule again; missed fires run only within its catchup window.

    Examples:

        wf schedules unpause daily-report
    """

    async def body() -> None:
        async with open_world(world, create=False) as opened:
            await _check_id(schedule, opened).unpause(note=note)

    execute(body)
    console.print(f"unpaused schedule {text(schedule)}")


@app.command("trigger")
def trigger_command(
    schedule: IdArgument, world: WorldOption = None, codec: CodecOption = None
) -> None:
    """Fire a schedule now, under its overlap rule; prints the run it started.

    Examples:

        wf schedules trigger daily-report
    """

    async def body() -> str | None:
        async with with_codec(open_world(world, create=False), codec) as opened:
            run = await _check_id(schedule, opened).trigger()
            return None if run is None else run.id

    run_id = execute(body)
    if run_id is None:
        console.print("a run is open: the overlap rule skipped or buffered this fire")
    else:
        console.print(f"started run {run_id}")


@app.command("backfill")
def backfill_command(
    schedule: IdArgument,
    start: Annotated[
        str, typer.Option("--start", help="First instant (ISO time, or an age like 2h).")
    ],
    end: Annotated[str, typer.Option("--end", help="End, excluded (ISO time, age or now).")],
    overlap: Annotated[
        Overlap,
        typer.Option(
            "--overlap",
            help="allow_all: every fire time starts a run; skip / cancel_other: "
            "apply that rule to each fire in turn; buffer_one acts as skip "
            "(a backfill waits for nothing).",
        ),
    ] = Overlap.ALLOW_ALL,
    as_json: JsonOption = False,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Fire every fire time in [--start, --end); each fire time starts at most one run, ever.

    Examples:

        wf schedules backfill daily-report --start 2026-11-01 --end 2026-11-08

        wf schedules backfill every-5m --start 1h --end now --json
    """
    first, last = parse_time(start, "--start"), parse_time(end, "--end")

    async def body() -> list[str]:
        async with with_codec(open_world(world, create=False), codec) as opened:
            try:
                runs = await _check_id(schedule, opened).backfill(first, last, overlap=overlap)
            except ValueError as exc:
                raise CliError(str(exc), EXIT_USAGE) from None
            return [run.id for run in runs]

    run_ids = execute(body)
    if as_json:
        print_json(run_ids)
        return
    console.print(f"{len(run_ids)} fire(s) have runs")
    for run_id in run_ids:
        console.print(run_id)


@app.command("delete")
def delete_command(schedule: IdArgument, world: WorldOption = None) -> None:
    """Delete a schedule; the runs it started stay.

    Examples:

        wf schedules delete daily-report
    """

    async def body() -> None:
        async with open_world(world, create=False) as opened:
            await _check_id(schedule, opened).delete()

    execute(body)
    console.print(f"deleted schedule {text(schedule)}")
