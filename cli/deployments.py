"""``wf deployments``: the builds workers run, their open runs, and draining an old one."""

from __future__ import annotations

from typing import Annotated

import anyio
import typer
from rich.table import Table

from workflow.deployments import DeploymentRecord, get_deployment, list_deployments

from ._output import console, markup_safe, print_json, text
from ._resolve import EXIT_ERROR, WorldOption, execute, open_world

app = typer.Typer(
    name="deployments",
    help="Deployments: the build ids workers run, the runs pinned to each, draining old ones.",
    no_args_is_help=True,
)

DRAIN_POLL = 1.0
"""Seconds between two looks of ``wf deployments drain --wait``."""


@app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """List build ids, newest registration first: open runs, the runs that still need
    the build, live workers, and which build is the newest (where new runs go).

    A run stays on the build that ran its first task (pin="run", the default) or
    moves to the newest build at its next task (@workflow(pin="latest")).

    Examples:

        wf deployments list

        wf deployments list --world postgresql://db/app --json
    """

    async def body() -> list[DeploymentRecord]:
        async with open_world(world, create=False) as opened:
            return await list_deployments(world=opened)

    records = execute(body)
    if as_json:
        print_json(records)
        return
    table = Table(box=None)
    for column in ("build", "newest", "open runs", "pinned", "live workers", "workflows"):
        table.add_column(column)
    for record in records:
        table.add_row(
            text(record.build_id, "bold" if record.newest else ""),
            "yes" if record.newest else "",
            str(record.open_runs),
            str(record.pinned_runs),
            text(str(record.live_workers), "" if record.live_workers else "yellow"),
            text(", ".join(record.workflows)),
        )
    console.print(table if records else "no build ids registered")


@app.command("drain")
def drain_command(
    build_id: Annotated[str, typer.Argument(help="The build id to drain, e.g. v1.")],
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until no open run needs the build.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(min=0.0, help="With --wait: give up after this many seconds."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """Tell whether no open run needs BUILD_ID any more, so its workers can stop.

    Prints how many open runs still need the build (pinned to it, or pin="latest"
    runs while it is the newest build) and exits 0 when none does, 1 otherwise.
    With --wait it looks again every second until the build is drained (or
    --timeout passes: exit 1). Stop a drained build's workers with SIGTERM.

    Examples:

        wf deployments drain v1

        wf deployments drain v1 --wait --timeout 3600 && systemctl stop worker@v1
    """

    async def body() -> DeploymentRecord | None:
        async with open_world(world, create=False) as opened:
            record = await get_deployment(build_id, world=opened)
            if not wait:
                return record
            with anyio.move_on_after(timeout if timeout is not None else float("inf")):
                while record is not None and record.pinned_runs:
                    await anyio.sleep(DRAIN_POLL)
                    record = await get_deployment(build_id, world=opened)
            return record

    record = execute(body)
    needing = 0 if record is None else record.pinned_runs
    if as_json:
        print_json(
            {
                "build_id": build_id,
                "drained": needing == 0,
                "pinned_runs": needing,
                "open_runs": 0 if record is None else record.open_runs,
                "live_workers": 0 if record is None else record.live_workers,
            }
        )
    elif record is None:
        console.print(f"build {markup_safe(build_id)} is unknown: no worker registered with it")
    elif needing == 0:
        console.print(
            f"build {markup_safe(build_id)} is drained: no open run needs it "
            f"({record.live_workers} live worker(s) may stop)"
        )
    else:
        console.print(
            f"build {markup_safe(build_id)} is not drained: {needing} open run(s) still need it "
            f"({record.live_workers} live worker(s))"
        )
    if needing:
        raise typer.Exit(EXIT_ERROR)
