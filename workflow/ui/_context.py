"""``Ui``: what every handler of the web app shares (world, templates, guard, options).

A leaf of ``workflow.ui``: the pages and actions import it, and ``_app``
builds the application from all three.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

import worlds
from workflow.shown import json_dumps, visible
from workflow.ui._paths import local_path, root_path
from workflow.ui._security import Guard
from workflow.views import format_duration, format_value
from worlds.protocol import World
from worlds.types import RunStatus

__all__ = ["COUNTS_FRESH", "COUNTS_REUSE", "PAGE_SIZE", "REUSED_KEPT", "Ui"]

_TEMPLATES = Path(__file__).parent / "templates"
PAGE_SIZE = 50
"""Runs on one page of the list."""
COUNTS_FRESH = 2.0
"""Seconds a count of runs per status is reused, at least."""
COUNTS_REUSE = 30
"""A count is reused for this many times as long as it took to make."""
REUSED_KEPT = 256
"""Answers ``Ui.reuse`` keeps at most (charts of different filters and minutes)."""
T = TypeVar("T")


class Verbatim(str):
    """Text a form sends back as it is (a hook token, a query): not escaped by
    ``visible``, only HTML-escaped, so the server receives what is stored."""

    __slots__ = ()


def _shown(value: Any) -> Any:
    """What every ``{{ ... }}`` of a template outputs: ``visible`` text (bidi and
    other invisible controls as escapes, as ``wf`` prints them), newlines kept."""
    # markup (``__html__``) is HTML made by a template, not stored text
    if isinstance(value, Verbatim) or hasattr(value, "__html__") or not isinstance(value, str):
        return value
    return visible(value, keep_newlines=True)


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
            loader=jinja2.FileSystemLoader(_TEMPLATES),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            finalize=_shown,
        )
        self.templates.filters["verbatim"] = lambda value: Verbatim(value)
        self.templates.filters["moment"] = _moment
        self.templates.filters["duration"] = format_duration
        self.templates.filters["value"] = format_value
        self.templates.filters["pathpart"] = lambda text: quote(str(text), safe="")
        self._counts: tuple[float, dict[str, int]] | None = None
        self._counts_lock = asyncio.Lock()
        self._reused: dict[Hashable, tuple[float, Any]] = {}
        self._reused_lock = asyncio.Lock()
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
            request_path=local_path(request.scope),
            root=root_path(request.scope),
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

    async def reuse(self, key: Hashable, make: Callable[[], Awaitable[T]]) -> T:
        """``make()``'s answer for ``key``, reused as ``counts`` is: for ``COUNTS_REUSE``
        times as long as it took, at least ``COUNTS_FRESH`` seconds (the charts' counts)."""
        async with self._reused_lock:
            now = time.monotonic()
            found = self._reused.get(key)
            if found is not None and now < found[0]:
                return cast(T, found[1])
            made = await make()
            took = time.monotonic() - now
            if len(self._reused) >= REUSED_KEPT:  # old minutes and filters: forget them
                self._reused.clear()
            self._reused[key] = (now + max(COUNTS_FRESH, COUNTS_REUSE * took), made)
            return made

    def json(self, data: Any, status: int = 200) -> Response:
        """``data`` as the JSON API writes it: ``workflow.shown.json_dumps``, like
        ``wf ... --json``, so no raw control or bidi character is in the body."""
        return Response(json_dumps(data), status_code=status, media_type="application/json")

    def error(self, request: Request, status: int, message: str) -> Response:
        """An error page (or JSON ``{"error": ...}`` under ``/api/``)."""
        message = worlds.redact_url(message)
        if local_path(request.scope).startswith("/api/"):
            return self.json({"error": message}, status)
        return self.page(request, "error.html", status, status=status, message=message)
