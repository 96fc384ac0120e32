"""The ``wf`` command: run workers, start runs, and find and manage them by attribute.

Exit codes: 0 success; 1 an error (unknown or ambiguous run, a conflict, a
failed run, a world that cannot serve a query); 2 a usage error (bad options
or values, a malformed ``--query``, which is shown with a caret under the
offending position). See ``docs/cli.md``.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperOption

import workflow

from . import attributes, hooks, runs, schedules, workers, world
from .start import start_command
from .ui import ui_command
from .worker import worker_command

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


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"wf (attribute-workflows) {workflow.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Durable workflows: run workers, start runs, find and manage them by attribute."""


app.command("start")(start_command)
app.command("worker")(worker_command)
app.command("ui")(ui_command)
app.add_typer(runs.app, name="runs")
app.add_typer(attributes.app, name="attributes")
app.add_typer(hooks.app, name="hooks")
app.add_typer(schedules.app, name="schedules")
app.add_typer(world.app, name="world")
app.add_typer(workers.app, name="workers")


def main() -> None:
    """Entry point for ``python -m workflow.cli`` (``python -m cli`` in a checkout)."""
    app()
