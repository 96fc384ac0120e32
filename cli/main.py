"""The ``wf`` command: run workers, start runs, and find and manage them by attribute.

Exit codes: 0 success; 1 an error (unknown or ambiguous run, a conflict, a
failed run, a world that cannot serve a query); 2 a usage error (bad options
or values, a malformed ``--query``, which is shown with a caret under the
offending position). See ``docs/cli.md``.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Annotated, Any

import anyio
import typer
from typer.core import TyperOption

from cli import attributes, hooks, runs, world
from cli._resolve import WorldOption, execute, open_world
from cli.start import start_command
from workflow import Worker

_display_type_rich = TyperOption.display_type_rich


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """No ``<bool>`` after an on/off flag such as ``--json`` in help (typer shows one)."""
    if self.is_flag and not self.count:
        return None
    return _display_type_rich(self, ctx)


TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]  # typer bug

app = typer.Typer(
    name="wf",
    help="Durable workflows: run workers, start runs, find and manage them by attribute.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    epilog="Exit codes: 0 ok, 1 error (unknown run, conflict, ...), 2 usage error.",
)


@app.callback()
def _root() -> None:
    """Durable workflows: run workers, start runs, find and manage them by attribute."""


app.command("start")(start_command)
app.add_typer(runs.app, name="runs")
app.add_typer(attributes.app, name="attributes")
app.add_typer(hooks.app, name="hooks")
app.add_typer(world.app, name="world")


@app.command()
def worker(
    module: Annotated[
        str, typer.Argument(help="Module whose @workflow and @step functions to run.")
    ],
    world: WorldOption = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Most work items in flight at once.")
    ] = 64,
    lease_seconds: Annotated[
        float, typer.Option(min=0.1, help="Lease length; renewed while held.")
    ] = 30.0,
) -> None:
    """Run a worker for MODULE until SIGINT or SIGTERM, then shut down gracefully.

    Example:

        wf worker myapp.workflows --world sqlite:///app.db --concurrency 32
    """
    sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module)
    except ImportError as exc:
        typer.echo(f"error: cannot import {module!r}: {exc}", err=True)
        raise typer.Exit(1) from None

    async def serve() -> None:
        async with open_world(world) as opened:
            runner = Worker(opened, [target], concurrency=concurrency, lease_seconds=lease_seconds)
            if not runner.names:
                typer.echo(f"error: {module!r} defines no @workflow or @step", err=True)
                raise typer.Exit(1)
            async with anyio.create_task_group() as group:
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    group.start_soon(runner.run)
                    typer.echo(
                        f"worker {runner.worker_id} serving {sorted(runner.names)}", err=True
                    )
                    async for _ in signals:
                        group.cancel_scope.cancel()
                        break

    execute(serve)


def main() -> None:
    """Entry point for ``python -m cli``."""
    app()
