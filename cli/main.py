"""The ``wf`` command: run workers and manage runs from a shell."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import anyio
import typer

import worlds
from workflow import Worker

app = typer.Typer(
    name="wf",
    help="Durable workflows: run workers, find and manage runs by attribute.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Durable workflows: run workers, find and manage runs by attribute."""


WORLD_HELP = "World URL (default: $WORKFLOW_WORLD, then sqlite:///.workflow/world.db)."


@app.command()
def worker(
    module: str = typer.Argument(..., help="Module whose @workflow and @step functions to run."),
    world: str | None = typer.Option(None, "--world", help=WORLD_HELP),
    concurrency: int = typer.Option(64, min=1, help="Most work items in flight at once."),
    lease_seconds: float = typer.Option(30.0, min=0.1, help="Lease length; renewed while held."),
) -> None:
    """Run a worker for MODULE until SIGINT or SIGTERM, then shut down gracefully.

    Example: wf worker myapp.workflows --world sqlite:///app.db --concurrency 32
    """
    sys.path.insert(0, os.getcwd())
    try:
        target = importlib.import_module(module)
    except ImportError as exc:
        typer.echo(f"error: cannot import {module!r}: {exc}", err=True)
        raise typer.Exit(1) from None
    opened = worlds.open(world)

    async def serve() -> None:
        async with opened:
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

    anyio.run(serve)


def main() -> None:
    """Entry point for ``python -m cli``."""
    app()
