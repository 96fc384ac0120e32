"""``wf ui``: serve the web UI (``workflow.ui``) over a world with uvicorn."""

from __future__ import annotations

import ipaddress
from typing import Annotated

import typer

from ._output import err_console, markup_safe
from ._resolve import EXIT_USAGE, CliError, WorldOption, execute, open_world

__all__ = ["ui_command"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and addresses in 127.0.0.0/8 or ``::1``."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def ui_command(
    host: Annotated[
        str, typer.Option(help="Address to bind; any but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8233,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="WF_UI_TOKEN",
            show_envvar=True,
            help="Require this token: a bearer header, or the login form's cookie.",
            show_default=False,
        ),
    ] = None,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide the actions (cancel, resume a hook).")
    ] = False,
    live: Annotated[
        float, typer.Option(min=0, help="Seconds between live refreshes of open pages (0: off).")
    ] = 2.0,
    world: WorldOption = None,
) -> None:
    """Serve the web UI: runs searched with the --query language, details, actions.

    Binds 127.0.0.1 by default and then answers only requests to a loopback
    host. Binding any other address needs --token (or $WF_UI_TOKEN): requests
    then carry it as "Authorization: Bearer TOKEN", or log in once in the
    browser. Needs the ui extra: pip install 'attribute-workflows\\[ui]'.

    Examples:

        wf ui --world sqlite:///app.db

        wf ui --world postgresql://app@db/app --host 0.0.0.0 --token "$UI_TOKEN"
    """

    async def body() -> None:
        if token and not token.strip():
            raise CliError(
                "--token (or $WF_UI_TOKEN) is blank: give the token requests must carry, "
                "or leave it out to serve loopback only",
                EXIT_USAGE,
            )
        if not is_loopback(host) and not token:
            raise CliError(
                f"--host {host} exposes the UI beyond this machine: pass --token "
                "(or set $WF_UI_TOKEN), or bind 127.0.0.1",
                EXIT_USAGE,
            )
        try:
            import uvicorn

            from workflow.ui import create_app
        except ImportError as exc:
            raise CliError(str(exc) if "extra" in str(exc) else _missing(exc)) from None
        opened = open_world(world, create=False)
        async with opened:
            app = create_app(opened, token=token or None, read_only=read_only, live_seconds=live)
            config = uvicorn.Config(app, host=host, port=port, log_level="warning")
            server = uvicorn.Server(config)
            shown = f"[{host}]" if ":" in host else host
            err_console.print(
                f"wf ui on http://{markup_safe(shown)}:{port} (Ctrl-C stops it)", highlight=False
            )
            await server.serve()

    execute(body)


def _missing(exc: ImportError) -> str:
    return (
        f"wf ui needs {exc.name}, which the ui extra installs: "
        "pip install 'attribute-workflows[ui]'"
    )
