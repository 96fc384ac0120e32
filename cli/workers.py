"""``wf workers``: the workers registered in the world, live and dead, and their work."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from workflow import list_workers
from worlds.types import WorkerRecord

from ._output import console, format_age, print_json, text
from ._resolve import WorldOption, execute, open_world

app = typer.Typer(
    name="workers",
    help="Workers: who serves the world, whether the world sees them alive, what they hold.",
    no_args_is_help=True,
)

_STYLES = {"live": "green", "silent": "yellow", "dead": "red", "stopped": "dim"}


@app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """List registered workers: id, status, host, pid, build, in-flight items, last heartbeat.

    A worker is ``live`` while it heartbeats, ``silent`` when its heartbeat is older
    than its liveness window but nobody could tell it is gone (its work stays its
    own), ``dead`` once the world declared it so (its work was taken over), and
    ``stopped`` after it shut down.

    Examples:

        wf workers list

        wf workers list --world postgresql://db/app --json
    """

    async def body() -> list[WorkerRecord]:
        async with open_world(world, create=False) as opened:
            return await list_workers(world=opened)

    workers = execute(body)
    if as_json:
        print_json(workers)
        return
    table = Table(box=None)
    for column in ("worker", "status", "host", "pid", "build", "in flight", "heartbeat", "up"):
        table.add_column(column)
    for worker in workers:
        table.add_row(
            text(worker.id),
            text(worker.status, _STYLES[worker.status]),
            text(worker.host),
            str(worker.pid),
            text(worker.build_id or "-"),
            str(worker.in_flight),
            format_age(worker.last_heartbeat_at) + " ago",
            format_age(worker.started_at),
        )
    console.print(table if workers else "no workers registered")
