"""``create_app``: the Starlette application, its templates and its error pages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import worlds
from workflow.errors import RunNotFoundError
from workflow.ui._security import LOOPBACK, Guard, SecurityMiddleware
from workflow.views import format_duration, format_value
from worlds.errors import WorldError, as_world_error
from worlds.protocol import World
from worlds.types import RunStatus

__all__ = ["Ui", "create_app"]

_HERE = Path(__file__).parent
PAGE_SIZE = 50
"""Runs on one page of the list."""
COUNTS_FRESH = 2.0
"""Seconds a count of runs per status is reused, at least."""
COUNTS_REUSE = 30
"""A count is reused for this many times as long as it took to make."""


def _moment(moment: datetime) -> str:
    """``2024-05-01 12:00:07``, in UTC: fixed text, so a live refresh changes nothing
    until the runs do (an age such as ``5s`` would change every second)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


class Ui:
    """What every handler shares: the world, the templates, the guard and the options."""

    def __init__(self, world: World, guard: Guard, *, read_only: bool, live_seconds: float) -> None:
        self.world = world
        self.guard = guard
        self.read_only = read_only
        self.live_seconds = live_seconds
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["moment"] = _moment
        self.templates.filters["duration"] = format_duration
        self.templates.filters["value"] = format_value
        self.templates.filters["pathpart"] = lambda text: quote(str(text), safe="")
        self._counts: tuple[float, dict[str, int]] | None = None
        self._counts_lock = asyncio.Lock()
        url = getattr(world, "url", None)
        self.world_name = worlds.redact_url(url) if isinstance(url, str) else type(world).__name__

    def page(self, request: Request, name: str, code: int = 200, **context: Any) -> Response:
        """Render template ``name`` (or only its live region, for a live refresh)."""
        context.update(
            csrf=self.guard.csrf,
            read_only=self.read_only,
            world_name=self.world_name,
            live_ms=int(self.live_seconds * 1000),
            logged_in=self.guard.token is not None,
            request_path=request.url.path,
        )
        html = self.templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=code)

    async def counts(self) -> dict[str, int]:
        """Runs per status in the whole world (``World.info``), cached.

        Counting a large world scans it, so a count is reused for
        ``COUNTS_REUSE`` times as long as it took, and at least
        ``COUNTS_FRESH`` seconds: open pages polling every few seconds cost one
        count between them, however many there are.
        """
        async with self._counts_lock:
            now = time.monotonic()
            if self._counts is not None and now < self._counts[0]:
                return self._counts[1]
            facts = await self.world.info()
            took = time.monotonic() - now
            counts = {s.value: int(facts.get(f"runs.{s.value}", 0)) for s in RunStatus}
            self._counts = (now + max(COUNTS_FRESH, COUNTS_REUSE * took), counts)
            return counts

    def error(self, request: Request, status: int, message: str) -> Response:
        """An error page (or JSON ``{"error": ...}`` under ``/api/``)."""
        message = worlds.redact_url(message)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=status)
        return self.page(request, "error.html", status, status=status, message=message)


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
    from workflow.ui import _actions, _pages

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
        ]
    hosts = (
        frozenset(h.lower() for h in allowed_hosts)
        if allowed_hosts is not None
        else (LOOPBACK if token is None else None)
    )
    app = Starlette(routes=routes)
    app.add_middleware(SecurityMiddleware, guard=guard, allowed_hosts=hosts)
    return app
