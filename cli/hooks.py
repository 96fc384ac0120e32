"""``wf hooks``: see the hooks runs are waiting on, and resume them from a shell."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from workflow import list_hooks, resume_hook
from worlds.quoting import quoted
from worlds.types import HookRecord

from ._codec_option import CodecOption, with_codec
from ._output import attributes_text, console, format_age, print_json, text
from ._resolve import EXIT_USAGE, CliError, WorldOption, execute, open_world, resolve_run

app = typer.Typer(
    name="hooks",
    help="Hooks: points where runs wait for payloads from outside.",
    no_args_is_help=True,
)


@app.command("list")
def list_command(
    run: Annotated[
        str | None, typer.Option("--run", help="Only this run's hooks (id, $name or k=v).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")] = False,
    world: WorldOption = None,
) -> None:
    """List live hooks: token, run, age and attributes.

    Examples:

        wf hooks list

        wf hooks list --run order=o-123 --json
    """

    async def body() -> list[HookRecord]:
        async with open_world(world, create=False) as opened:
            run_id = (await resolve_run(opened, run)).id if run else None
            return await list_hooks(run_id=run_id, world=opened)

    hooks = execute(body)
    if as_json:
        print_json(hooks)
        return
    table = Table(box=None)
    for column in ("token", "run", "hook", "age", "attributes"):
        table.add_column(column)
    for hook in hooks:
        table.add_row(
            text(hook.token),
            text(hook.run_id),
            str(hook.hook),
            format_age(hook.created_at),
            text(attributes_text(hook.attributes)),
        )
    console.print(table if hooks else "no live hooks")


@app.command("resume")
def resume_command(
    token: Annotated[str, typer.Argument(help="The hook's token.")],
    payload: Annotated[str, typer.Argument(help="The payload, a JSON value.")],
    resume_id: Annotated[
        str | None,
        typer.Option("--resume-id", help="Deliver at most once per resume id (retries)."),
    ] = None,
    world: WorldOption = None,
    codec: CodecOption = None,
) -> None:
    """Deliver PAYLOAD (a JSON value) to the hook TOKEN; prints the run it resumed.

    Examples:

        wf hooks resume approve-nda '{"approved": true}'

        wf hooks resume order-7-paid 1999 --resume-id evt_123
    """

    async def body() -> str:
        try:
            value: Any = json.loads(payload)
        except ValueError:
            raise CliError(
                f"PAYLOAD must be a JSON value, got {quoted(payload)}", EXIT_USAGE
            ) from None
        except RecursionError:
            raise CliError("PAYLOAD is nested too deeply to accept", EXIT_USAGE) from None
        async with with_codec(open_world(world, create=False), codec) as opened:
            try:
                return (await resume_hook(token, value, resume_id=resume_id, world=opened)).id
            except (ValueError, TypeError) as exc:  # the arguments: checked before any write
                raise CliError(str(exc), EXIT_USAGE) from None

    console.print(f"resumed run {execute(body)}")
