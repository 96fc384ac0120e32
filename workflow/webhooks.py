"""Hooks and updates as HTTP endpoints: a small ASGI app that turns requests into
``resume_hook`` and ``Run.update``.

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

A body is delivered only once all of it arrived: one that ends before its
``Content-Length`` (or runs past it) gets 400, and one cut by the sender's
disconnect gets no answer; neither delivers anything nor uses up its
``Idempotency-Key``, so the sender's retry of the whole body is delivered.
The token is the path after the prefix as the server decoded it (ASGI's
``path``), decoded once: ``/hooks/tok%252DA`` names the token ``tok%2DA``.

``POST /updates/{run}/{name}`` with a JSON body sends update ``name`` to run
``run`` (``Run.update``), waits for the workflow's answer and returns it: 200
with the reply as the JSON document. An ``Idempotency-Key`` header (or
``?update_id=``) is the update id, so a retried request delivers once and gets
the recorded reply. 422 ``{"error": message}``: the workflow rejected it; 409
``{"error": reason}``: the run was closed, or closed before replying; 404: no
such run; 504: no answer within ``update_timeout`` seconds (the update stays
delivered: retry with the same key for its answer); 400, 405, 413 and 503 as
for hooks.

The app never lets an exception escape to the server.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

from workflow._attributes import check_text, check_token
from workflow._updates import check_update_name
from workflow.client import get_run, resume_hook
from workflow.errors import HookNotFoundError, UpdateFailedError, UpdateRejectedError
from worlds.errors import WorldError
from worlds.protocol import World

__all__ = ["HookEndpoints"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class HookEndpoints:
    """An ASGI application serving ``POST {prefix}{token}`` and
    ``POST {update_prefix}{run}/{name}``.

    Args:
        world: the world whose hooks to resume and runs to update (default: the
            configured one).
        prefix: the path before a hook's token.
        max_body: the largest request body accepted, in bytes.
        update_prefix: the path before a run id and an update name.
        update_timeout: seconds an update request waits for the workflow's answer
            (``None``: as long as the connection lasts).
    """

    def __init__(
        self,
        world: World | None = None,
        *,
        prefix: str = "/hooks/",
        max_body: int = 1 << 20,
        update_prefix: str = "/updates/",
        update_timeout: float | None = 30.0,
    ) -> None:
        for what, given in (("prefix", prefix), ("update_prefix", update_prefix)):
            if not given.startswith("/") or not given.endswith("/"):
                raise ValueError(f"{what} must start and end with '/', got {given!r}")
        if prefix.startswith(update_prefix) or update_prefix.startswith(prefix):
            raise ValueError(f"prefix {prefix!r} and update_prefix {update_prefix!r} overlap")
        self.world = world
        self.prefix = prefix
        self.max_body = max_body
        self.update_prefix = update_prefix
        self.update_timeout = update_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        updating = path.startswith(self.update_prefix) and len(path) > len(self.update_prefix)
        if not updating and (not path.startswith(self.prefix) or len(path) == len(self.prefix)):
            await _respond(send, 404, {"error": "not found"})
            return
        if scope["method"] != "POST":
            await _respond(send, 405, {"error": "use POST"})
            return
        try:
            body = await self._body(scope, receive)
        except _Refused as refused:
            if refused.status is None:
                log.info("webhook at %r: the sender left before the body ended", path)
            else:
                await _respond(send, refused.status, {"error": refused.reason})
            return
        if updating:
            await self._update(scope, send, path[len(self.update_prefix) :], body)
            return
        # ASGI's ``path`` is already percent-decoded: decoding it again would let
        # ``tok%252DA`` reach ``tok-A``.
        token = path[len(self.prefix) :]
        try:
            check_token(token)
        except ValueError:
            await _respond(send, 404, {"error": f"no live hook {token!r}"})
            return
        try:
            payload = _decode(body)
            resume_id = _key(scope, "resume_id")
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

    async def _update(self, scope: Scope, send: Send, target: str, body: bytes) -> None:
        """Send the update ``target`` (``{run}/{name}``) names and answer its reply."""
        run_id, _, name = target.partition("/")
        try:
            payload = _decode(body)
            check_update_name("update name", name)
            update_id = _key(scope, "update_id")
            if update_id is not None:
                check_update_name("update id", update_id)
            run = get_run(run_id, world=self.world)
            if await run.world.get_run(run_id) is None:
                await _respond(send, 404, {"error": f"no run {run_id!r}"})
                return
            reply = await run.update(
                name, payload, update_id=update_id, timeout=self.update_timeout
            )
            document = json.dumps(reply, default=str, allow_nan=False)
        except UpdateRejectedError as exc:
            await _respond(send, 422, {"error": exc.message})
        except UpdateFailedError as exc:
            await _respond(send, 409, {"error": exc.reason})
        except TimeoutError as exc:
            await _respond(send, 504, {"error": str(exc)})
        except (ValueError, TypeError) as exc:
            await _respond(send, 400, {"error": str(exc)})
        except RecursionError:
            await _respond(send, 400, {"error": "the body nests arrays and objects too deeply"})
        except WorldError as exc:
            log.warning("update %r of run %r: the world failed: %s", name, run_id, exc)
            await _respond(send, 503, {"error": "the world is unavailable; retry later"})
        except Exception:
            log.exception("update %r of run %r failed", name, run_id)
            await _respond(send, 500, {"error": "internal error"})
        else:
            await _send_json(send, 200, document.encode())

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        """The whole request body, or ``_Refused``: it is too large, it does not match
        its ``Content-Length``, or the sender disconnected before it ended."""
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body:
            raise _Refused(413, f"body over {self.max_body} bytes")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                # What arrived so far is not the body the sender meant: deliver
                # nothing, so the sender's retry delivers the whole of it.
                raise _Refused(None, "the sender disconnected before the body ended")
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _Refused(413, f"body over {self.max_body} bytes")
            if declared is not None and size > declared:
                raise _Refused(400, f"the body is longer than its Content-Length of {declared}")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        if declared is not None and size < declared:
            raise _Refused(
                400, f"the body ended after {size} of its Content-Length of {declared} bytes"
            )
        return b"".join(chunks)


class _Refused(Exception):  # noqa: N818 - an answer, not an error
    """The body cannot be read whole: answer ``status`` (``None``: the sender is gone)."""

    def __init__(self, status: int | None, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _content_length(scope: Scope) -> int | None:
    """The request's ``Content-Length`` (``None`` without one), or ``_Refused`` (400)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            if not (text.isascii() and text.isdigit()):
                raise _Refused(400, f"Content-Length must be a number of bytes, got {text!r}")
            return int(text)
    return None


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


def _key(scope: Scope, parameter: str) -> str | None:
    """The ``Idempotency-Key`` header, else the query's ``parameter``; ``None`` without."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"idempotency-key":
            return bytes(value).decode("latin-1")
    query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
    values = query.get(parameter)
    return values[0] if values else None


async def _respond(send: Send, status: int, document: dict[str, Any]) -> None:
    await _send_json(send, status, json.dumps(document).encode())


async def _send_json(send: Send, status: int, body: bytes) -> None:
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
