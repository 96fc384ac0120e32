"""``wf worker``: run a module's workflows and steps until told to stop.

The first SIGINT or SIGTERM stops leasing, lets in-flight work finish for up
to ``--grace`` seconds, releases whatever is unfinished so another worker
takes it at once, and exits 0 (one arriving during start-up just exits 0). A
second signal exits at once. A world that cannot be used and cannot heal by
waiting (read-only, schema newer than this code, authentication failed, no
such database) ends the worker with a one-line reason and exit code 1.
"""

from __future__ import annotations

import os
import signal
from typing import Annotated

import anyio
import typer

from workflow import Worker
from workflow.errors import WorkerFencedError
from worlds.errors import WorldMisconfiguredError
from worlds.quoting import quoted

from ._codec_option import CodecOption, with_codec
from ._modules import load_module
from ._processes import cli_command, supervise
from ._resolve import EXIT_ERROR, CliError, WorldOption, execute, open_world

__all__ = ["worker_command"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def worker_command(
    module: Annotated[
        str,
        typer.Argument(
            help="Module (or path to a .py file) whose @workflow and @step functions to run."
        ),
    ],
    world: WorldOption = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Most work items in flight at once.")
    ] = 64,
    lease_seconds: Annotated[
        float, typer.Option(min=0.1, help="Lease length; renewed while held.")
    ] = 30.0,
    grace: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="On SIGINT/SIGTERM, seconds in-flight work may take to finish"
            " before it is released to other workers.",
        ),
    ] = 10.0,
    codec: CodecOption = None,
    build_id: Annotated[
        str | None,
        typer.Option(
            "--build-id",
            help="The build this worker runs (default: $WORKFLOW_BUILD_ID). Runs stay on "
            "the build that ran their first task unless their workflow is pin='latest'; "
            "new runs go to the newest build (see wf deployments).",
            show_default=False,
        ),
    ] = None,
    processes: Annotated[
        int,
        typer.Option(
            min=1,
            help="Worker processes to run, each a worker of its own with --concurrency slots"
            " (one Python process uses one core): a supervisor forwards signals to them, and"
            " stops them all if one ends.",
        ),
    ] = 1,
) -> None:
    """Run a worker for MODULE until SIGINT or SIGTERM, then shut down gracefully.

    Example:

        wf worker myapp.workflows --world sqlite:///app.db --concurrency 32

        wf worker myapp.workflows --build-id v2

        wf worker myapp.workflows --world postgresql://db/app --processes 4
    """
    if processes > 1:
        options = {
            "--world": world,
            "--concurrency": str(concurrency),
            "--lease-seconds": repr(lease_seconds),
            "--grace": repr(grace),
            "--codec": codec,
            "--build-id": build_id,
        }
        given = [
            part for name, value in options.items() if value is not None for part in (name, value)
        ]

        async def check() -> None:  # bad input is one line, once, before any process starts
            load_module(module)
            with_codec(open_world(world), codec)

        execute(check)
        raise typer.Exit(supervise(cli_command("worker", module, *given), processes))

    async def serve() -> None:
        target = load_module(module)
        # a bad URL (or codec) is one line, before anything starts
        chosen = with_codec(open_world(world), codec)
        runner: Worker | None = None
        problem: str | None = None
        with anyio.open_signal_receiver(*_SIGNALS) as signals:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    received = 0
                    async for signum in signals:
                        received += 1
                        if received > 1:
                            typer.echo("second signal: exiting at once", err=True)
                            os._exit(128 + signum)
                        if runner is None:
                            group.cancel_scope.cancel()  # still starting: nothing to finish
                            return
                        typer.echo(f"stopping: in-flight work has {grace:g} s to finish", err=True)
                        runner.stop()

                group.start_soon(watch)
                async with chosen as opened:
                    candidate = Worker(
                        opened,
                        [target],
                        concurrency=concurrency,
                        lease_seconds=lease_seconds,
                        shutdown_grace=grace,
                        build_id=build_id,
                    )
                    if candidate.names:
                        runner = candidate
                        build = "" if runner.build_id is None else f" of build {runner.build_id}"
                        typer.echo(
                            f"worker {runner.worker_id}{build} serving {sorted(runner.names)}",
                            err=True,
                        )
                        try:
                            await runner.run()
                        except WorldMisconfiguredError as exc:
                            problem = f"the world cannot be used: {exc}"
                        except WorkerFencedError as exc:
                            problem = f"{exc}: its work was taken over; start it again"
                        except ValueError as exc:
                            if runner.build_id is None:
                                raise
                            problem = f"the world refused this worker: {exc}"
                    else:
                        problem = f"{quoted(module)} defines no @workflow or @step"
                group.cancel_scope.cancel()
        if problem is not None:
            raise CliError(problem, EXIT_ERROR)

    execute(serve)
