"""Hooks as HTTP endpoints: a small ASGI app that turns requests into ``resume_hook``.

::

    from workflow.webhooks import HookEndpoints
    app = HookEndpoints(worlds.open("postgresql://..."))   # serve with any ASGI server

``POST /hooks/{token}`` with a JSON body delivers the decoded body to the hook.
An ``Idempotency-Key`` header (or ``?resume_id=``) makes retries of one webhook
deliver once. Answers, each with a JSON document:

- 202 ``{"run_id": ...}``: delivered;
- 400 ``{"error": reason}``: the body cannot be accepted, and nothing was
  delivered: it is not JSON (an empty body, ``NaN``, ``Infinity``, invalid
  UTF-8), it nests too deeply to decode, or it holds a value no world
  can record (an integer outside ``-2**63``..``2**64 - 1``, a lone surrogate
  such as ``"\\ud800"``); or the resume id cannot be stored;
- 404: the token is unknown or its run has closed (a malformed token is unknown);
- 405: a method other than POST; 413: a body over ``max_body`` bytes;
- 503: the world cannot be reached now (retry later).

The app never lets an exception escape to the server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs, unquote

from workflow._attributes import check_text, check_token
from workflow.client import resume_hook
from workflow.errors import HookNotFoundError
from worlds.errors import WorldError
from worlds.protocol import World

__all__ = ["HookEndpoints"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class HookEndpoints:
    """An ASGI application serving ``POST {prefix}{token}``.

    Args:
        world: the world whose hooks to resume (default: the configured one).
        prefix: the path before the token.
        max_body: the largest request body accepted, in bytes.
    """

    def __init__(
        self, world: World | None = None, *, prefix: str = "/hooks/", max_body: int = 1 << 20
    ) -> None:
        if not prefix.startswith("/") or not prefix.endswith("/"):
            raise ValueError(f"prefix must start and end with '/', got {prefix!r}")
        self.world = world
        self.prefix = prefix
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not path.startswith(self.prefix) or len(path) == len(self.prefix):
            await _respond(send, 404, {"error": "not found"})
            return
        if scope["method"] != "POST":
            await _respond(send, 405, {"error": "use POST"})
            return
        body = await self._body(receive)
        if body is None:
            await _respond(send, 413, {"error": f"body over {self.max_body} bytes"})
            return
        token = unquote(path[len(self.prefix) :])
        try:
            check_token(token)
        except ValueError:
            await _respond(send, 404, {"error": f"no live hook {token!r}"})
            return
        try:
            payload = _decode(body)
            resume_id = _resume_id(scope)
            if resume_id is not None:
                check_text("the resume id", resume_id)
            run = await resume_hook(token, payload, resume_id=resume_id, world=self.world)
        except HookNotFoundError:
            await _respond(send, 404, {"error": f"no live hook {token!r}"})
        except (ValueError, TypeError) as exc:
            await _respond(send, 400, {"error": str(exc)})
        except RecursionError:
            await _respond(send, 400, {"error": "the body nests arrays and objects too deeply"})
        except WorldError as exc:
            log.warning("webhook for hook %r: the world failed: %s", token, exc)
            await _respond(send, 503, {"error": "the world is unavailable; retry later"})
        except Exception:
            log.exception("webhook for hook %r failed", token)
            await _respond(send, 500, {"error": "internal error"})
        else:
            await _respond(send, 202, {"run_id": run.id})

    async def _body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks)
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _decode(body: bytes) -> Any:
    """The JSON document in ``body``, or ``ValueError`` saying why it cannot be accepted."""
    if not body.strip():
        raise ValueError("the body must be JSON, and it is empty")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the body must be JSON in UTF-8") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("the body nests arrays and objects too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the body must be JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"the body must be JSON: {name} is not a JSON value")


def _resume_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"idempotency-key":
            return bytes(value).decode("latin-1")
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    values = query.get("resume_id")
    return values[0] if values else None


async def _respond(send: Send, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
