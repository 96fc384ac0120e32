"""The ``wf`` command line (typer): ``wf --help`` lists the commands."""

from .main import app, main

__all__ = ["app", "main"]
