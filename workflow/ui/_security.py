"""What keeps the UI safe to expose: who may see it, which host it answers, and headers.

- Without a token the app answers only requests addressed to a loopback host
  (``127.0.0.1``, ``localhost``, ``[::1]``): a web page elsewhere cannot reach it
  through DNS rebinding. ``wf ui`` refuses any other bind address without one.
- With a token, every request needs ``Authorization: Bearer TOKEN`` or the
  HttpOnly, SameSite=Strict session cookie that ``POST /login`` sets.
- Every POST carries the app's CSRF token (a hidden form field), and a browser
  POST whose ``Origin`` is another site is refused.
- Every response gets a Content-Security-Policy with no inline script or style
  and ``frame-ancestors 'none'``, and is never cached.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from workflow.ui._paths import local_path, root_path

__all__ = ["COOKIE", "Guard", "SecurityMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "wf_ui_session"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
OPEN_PATHS = ("/login", "/static/")
"""Paths served without a session: the login form and its stylesheet and script."""


@dataclass
class Guard:
    """The app's secrets: the access token (if any) and the CSRF token."""

    token: str | None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @property
    def csrf(self) -> str:
        """The CSRF token forms carry; it changes when the app restarts."""
        return hmac.new(self.secret, b"csrf", hashlib.sha256).hexdigest()

    @property
    def session(self) -> str:
        """The login cookie's value: derived from the token, never the token itself."""
        assert self.token is not None
        return hmac.new(self.token.encode(), b"wf-ui-session", hashlib.sha256).hexdigest()

    def check_csrf(self, value: str | None) -> bool:
        """True if ``value`` is this app's CSRF token."""
        return value is not None and hmac.compare_digest(value.encode(), self.csrf.encode())

    def check_token(self, value: str) -> bool:
        """True if ``value`` is the access token."""
        assert self.token is not None
        return hmac.compare_digest(value.encode(), self.token.encode())

    def authenticated(self, headers: dict[bytes, bytes]) -> bool:
        """True if the request carries the bearer token or the session cookie."""
        if self.token is None:
            return True
        auth = headers.get(b"authorization", b"").decode("latin-1")
        scheme, _, credentials = auth.partition(" ")
        if scheme.lower() == "bearer" and self.check_token(credentials.strip()):
            return True
        for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self.session.encode()):
                return True
        return False


def _answers(host: str, allowed: frozenset[str]) -> bool:
    """Whether a request to ``host`` is answered: a name in ``allowed``, or, when only
    loopback hosts are (the default without a token), any loopback address
    (127.0.0.0/8, ``[::1]``), so ``wf ui --host 127.0.0.2`` answers its own address."""
    if host in allowed:
        return True
    if allowed != LOOPBACK:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host(headers: dict[bytes, bytes]) -> str:
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class SecurityMiddleware:
    """Wraps the app: host check, authentication, cross-site POSTs, security headers."""

    def __init__(self, app: ASGIApp, guard: Guard, allowed_hosts: frozenset[str] | None) -> None:
        self.app = app
        self.guard = guard
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        # A request refused here has its body read first: a server that closes a
        # connection with request bytes still unread makes the close a TCP reset,
        # which can destroy the answer before the client reads it (it sees
        # ConnectionResetError, not the refusal).
        path = local_path(scope)
        if self.allowed_hosts is not None and not _answers(_host(headers), self.allowed_hosts):
            await _drain(receive)
            await _plain(with_headers, 421, "this UI answers only requests to a loopback host")
            return
        if scope.get("method") == "POST" and not _same_origin(headers):
            await _drain(receive)
            await _plain(with_headers, 403, "cross-site POST refused")
            return
        if not path.startswith(OPEN_PATHS) and not self.guard.authenticated(headers):
            await _drain(receive)
            if path.startswith("/api/") or b"authorization" in headers:
                await _plain(with_headers, 401, "a bearer token or a login is required")
                return
            query = scope.get("query_string", b"").decode("latin-1")
            target = path + (f"?{query}" if query else "")
            location = f"{root_path(scope)}/login?next={quote(target, safe='')}"
            await with_headers(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", location.encode("latin-1"))],
                }
            )
            await with_headers({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, with_headers)


def _same_origin(headers: dict[bytes, bytes]) -> bool:
    """False for a browser POST sent from another site.

    Browsers say where a request comes from in ``Sec-Fetch-Site`` (and in
    ``Origin``); a client that sends neither is no browser, and still needs the
    CSRF token.
    """
    site = headers.get(b"sec-fetch-site")
    if site is not None:
        return site in (b"same-origin", b"none")
    origin = headers.get(b"origin")
    if origin is None:
        return True
    host = headers.get(b"host", b"").decode("latin-1").lower()
    return urlsplit(origin.decode("latin-1")).netloc.lower() == host


_DRAINED_BYTES = 1 << 20
"""The most of a refused request's body read (a form of this UI is a few hundred bytes)."""


async def _drain(receive: Receive) -> None:
    """Read the body of a request answered without the app (up to ``_DRAINED_BYTES``)."""
    read = 0
    while read <= _DRAINED_BYTES:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        read += len(message.get("body", b""))


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})
