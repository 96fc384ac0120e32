"""The ``wf`` command line (typer): ``wf --help`` lists the commands."""

from cli.main import app, main

__all__ = ["app", "main"]
