"""The web UI served for a test by a real uvicorn server, with a Worker, on one event loop.

The loop runs in a thread; ``call`` runs a coroutine on it from the test (the
world's connections, and a memory world's state, belong to that loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

import worlds
from tests.apps.uiapp import WORKFLOWS
from workflow import Worker
from workflow.ui import create_app
from worlds.protocol import World

T = TypeVar("T")


class UiServer:
    """``with UiServer(url) as server:`` serves ``create_app`` at ``server.base``
    (under ``server.base + prefix`` with a ``prefix``: mounted in a Starlette app)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        read_only: bool = False,
        live_seconds: float = 0.5,
        worker: bool = True,
        prefix: str = "",
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.options: dict[str, Any] = {
            "token": token,
            "read_only": read_only,
            "live_seconds": live_seconds,
        }
        self.with_worker = worker
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.world: World = worlds.open(url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coro`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _serve(self, started: asyncio.Future[None]) -> None:
        """Open the world and a Worker, serve until ``stop``, then close all (one task)."""
        self.stopping = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                await stack.enter_async_context(self.world)
                if self.with_worker:
                    await stack.enter_async_context(Worker(self.world, WORKFLOWS))
                app: ASGIApp = create_app(self.world, **self.options)
                if self.prefix:  # mounted as an application would: Mount("/wf", app)
                    app = Starlette(routes=[Mount(self.prefix, app)])
                server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
                serving = asyncio.get_running_loop().create_task(server.serve([self.sock]))
                while not server.started:
                    if serving.done():
                        serving.result()
                    await asyncio.sleep(0.02)
                started.set_result(None)
                await self.stopping.wait()
                server.should_exit = True
                await serving
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            raise

    def __enter__(self) -> UiServer:
        self.thread.start()
        started: asyncio.Future[None] = self.loop.create_future()
        self.task = asyncio.run_coroutine_threadsafe(self._serve(started), self.loop)
        asyncio.run_coroutine_threadsafe(asyncio.wait_for(started, 60), self.loop).result(70)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.stopping.set)
            self.task.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.sock.close()

    def get(
        self, path: str, headers: dict[str, str] | None = None, data: bytes | None = None
    ) -> tuple[int, dict[str, str], str]:
        """Status, headers and body of a request (redirects are not followed)."""
        request = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()

    def json(self, path: str, headers: dict[str, str] | None = None) -> Any:
        """The JSON document at ``path`` (which must answer 200)."""
        status, _, body = self.get(path, headers)
        assert status == 200, (status, body)
        return json.loads(body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
