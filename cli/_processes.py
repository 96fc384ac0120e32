"""``wf worker --processes N``: N worker processes under one supervising process.

One Python process runs its event loop on one core, so a host with more cores
runs more worker processes. The supervisor starts ``N`` copies of the same
``wf worker`` command (without ``--processes``), each in a session of its own so
that a terminal's Ctrl-C reaches them once, through the supervisor, and not
twice (a second signal makes a worker exit at once). It forwards every SIGINT
and SIGTERM to each child that still runs: the first stops each gracefully, a
second makes each exit at once, as for one worker.

A child that ends while no stop was asked for (its world cannot be used, it
was fenced, it was killed) stops the others: a process manager (systemd,
Kubernetes) then restarts the whole set, rather than fewer workers running
than were asked for. The supervisor exits with the first non-zero code a
child ended with (``128 + n`` for death by signal ``n``), else 0.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

import typer

__all__ = ["cli_command", "supervise"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_CHECK_SECONDS = 0.2
"""How often the supervisor looks for a child that ended (signals it forwards at once)."""

_PACKAGE = __name__.rpartition(".")[0]
"""This CLI's package as imported here: ``workflow.cli`` installed, ``cli`` in a checkout."""


def cli_command(*args: str) -> list[str]:
    """The command that runs ``wf`` with ``args`` in this interpreter."""
    return [sys.executable, "-m", _PACKAGE, *args]


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def supervise(command: Sequence[str], processes: int) -> int:
    """Run ``processes`` copies of ``command`` until every one ended; the exit code."""
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in _SIGNALS}
    try:
        try:
            for _ in range(processes):
                children.append(subprocess.Popen(list(command), start_new_session=True))
        except OSError:
            forward(signal.SIGTERM, None)  # the ones started stop; the error is the answer
            raise
        pids = ", ".join(str(child.pid) for child in children)
        typer.echo(f"supervising {processes} worker processes ({pids})", err=True)
        while any(child.poll() is None for child in children):
            ended = next((c for c in children if c.returncode is not None), None)
            if ended is not None and not stopping:
                code = _exit_code(ended.returncode)
                typer.echo(
                    f"worker process {ended.pid} ended (exit code {code}): stopping the others",
                    err=True,
                )
                forward(signal.SIGTERM, None)
            time.sleep(_CHECK_SECONDS)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return next((_exit_code(c.returncode) for c in children if c.returncode), 0)
