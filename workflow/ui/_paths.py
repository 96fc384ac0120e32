"""Where the app is mounted: every URL it emits starts with the mount's root path.

Mounted with Starlette's ``Mount("/wf", app)`` (or served behind a proxy with
a root path), requests arrive with ``scope["root_path"] == "/wf"``; a link,
redirect, form action, fragment or asset written as ``/static/ui.css`` would
leave the mount and 404, so each is written as ``root + "/static/ui.css"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["app_url", "local_path", "root_path"]


def root_path(scope: Mapping[str, Any]) -> str:
    """The path the app is mounted at, without a trailing ``/`` (``""`` at the root)."""
    root = scope.get("root_path") or ""
    return str(root).rstrip("/")


def local_path(scope: Mapping[str, Any]) -> str:
    """The request's path inside the app: ``/api/runs`` for ``/wf/api/runs`` under ``/wf``.

    ASGI servers and Starlette's ``Mount`` put the root path in front of
    ``path``; a server that does not is taken as it is.
    """
    path = str(scope.get("path") or "/")
    root = root_path(scope)
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def app_url(scope: Mapping[str, Any], path: str) -> str:
    """``path`` (``/runs/x``, starting with ``/``) as a URL under the mount's root path."""
    return root_path(scope) + path
