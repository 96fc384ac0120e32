"""``create_app``: the Starlette application: its routes, bound to one ``Ui``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from workflow.errors import RunNotFoundError
from workflow.ui import _actions, _chart_pages, _pages, _schedules
from workflow.ui._context import Ui
from workflow.ui._security import LOOPBACK, Guard, SecurityMiddleware
from worlds.errors import WorldError, as_world_error
from worlds.protocol import World

__all__ = ["create_app"]

_HERE = Path(__file__).parent


Handler = Callable[[Request], Awaitable[Response]]


def create_app(
    world: World,
    token: str | None = None,
    read_only: bool = False,
    *,
    live_seconds: float = 2.0,
    allowed_hosts: list[str] | None = None,
) -> Starlette:
    """The web UI over ``world`` as an ASGI application.

    Args:
        world: the world to show; the caller opens and closes it.
        token: when given, every request needs ``Authorization: Bearer TOKEN``
            or the cookie the login form sets. Without one the app answers only
            requests addressed to a loopback host (``127.0.0.1``, ``localhost``).
        read_only: hide and refuse the actions (cancel, resume a hook).
        live_seconds: how often open pages refresh themselves (0: never).
        allowed_hosts: the ``Host`` names the app answers (default: loopback
            names without a token, any host with one).

    Raises:
        ValueError: an empty token, or a negative ``live_seconds``.
    """
    if token is not None and not token.strip():
        raise ValueError("token must not be empty: pass None to serve loopback only")
    if live_seconds < 0:
        raise ValueError(f"live_seconds must be >= 0, got {live_seconds}")
    guard = Guard(token)
    ui = Ui(world, guard, read_only=read_only, live_seconds=live_seconds)

    def bind(handler: Callable[[Ui, Request], Awaitable[Response]]) -> Handler:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(ui, request)
            except RunNotFoundError as exc:
                return ui.error(request, 404, f"no run {exc.run_id!r} in this world")
            except Exception as exc:
                world_error = as_world_error(exc)
                if world_error is None and not isinstance(exc, WorldError):
                    raise
                return ui.error(request, 503, f"the world cannot answer now: {exc}")

        return endpoint

    routes: list[Route | Mount] = [
        Route("/", bind(_pages.runs_page)),
        Route("/fragments/counts", bind(_pages.counts_fragment)),
        Route("/workers", bind(_pages.workers_page)),
        Route("/fragments/chart", bind(_chart_pages.runs_chart)),
        Route("/flow", bind(_chart_pages.flow_page)),
        Route("/schedules", bind(_schedules.schedules_page)),
        Route("/runs/by/{key}/{value:path}", bind(_pages.run_by_pair)),
        Route("/runs/{run_id}", bind(_pages.run_page)),
        Route("/api/runs", bind(_pages.runs_json)),
        Route("/api/runs/{run_id}", bind(_pages.run_json)),
        Route("/login", bind(_actions.login_page), methods=["GET", "POST"]),
        Route("/logout", bind(_actions.logout), methods=["POST"]),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    if not read_only:
        routes += [
            Route("/runs/{run_id}/cancel", bind(_actions.cancel), methods=["POST"]),
            Route("/hooks/resume", bind(_actions.resume), methods=["POST"]),
            Route(
                "/schedules/{schedule_id}/{action}",
                bind(_actions.schedule_action),
                methods=["POST"],
            ),
        ]
    hosts = (
        frozenset(h.lower() for h in allowed_hosts)
        if allowed_hosts is not None
        else (LOOPBACK if token is None else None)
    )
    app = Starlette(routes=routes)
    app.add_middleware(SecurityMiddleware, guard=guard, allowed_hosts=hosts)
    return app
