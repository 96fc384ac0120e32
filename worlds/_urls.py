"""World URLs as they may be shown and as they are checked.

Every message, ``repr`` and log line that names a world URL passes it through
``redact_url`` first, so ``postgresql://u:s3cret@host/db`` is only ever shown
as ``postgresql://u:***@host/db``. ``check_hosts`` refuses a malformed host or
port with a message naming the part that is wrong, before any driver sees it.
"""

from __future__ import annotations

import re

__all__ = ["check_hosts", "redact_url"]

MASK = "***"

_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@?#\s]*):[^/?#\s]*@")
"""``scheme://user:SECRET@``."""

_SECRET_OPTION = re.compile(
    r"(?P<head>[?&](?:password|passfile|sslpassword|sslkey)=)[^&#\s'\"]*", re.IGNORECASE
)
"""``?password=SECRET`` and libpq's other secret query options."""


def redact_url(url: str) -> str:
    """``url`` with its password, and any secret query option, replaced by ``***``.

    ``postgresql://u:s3cret@db/app?sslpassword=x`` becomes
    ``postgresql://u:***@db/app?sslpassword=***``. Also masks every URL inside
    a longer text (an error message that quotes one); text without
    credentials comes back unchanged. Never raises.
    """
    masked = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", url)
    return _SECRET_OPTION.sub(lambda m: f"{m['head']}{MASK}", masked)


MAX_PORT = 65535


def check_hosts(location: str) -> None:
    """Raise ``ValueError`` naming the bad part if ``location``'s hosts or ports are malformed.

    ``location`` is what follows ``scheme://`` up to the query: ``[user[:password]@]``
    then one or more comma-separated ``host[:port]`` (libpq's multi-host form), then
    ``/database``. A host may be empty (the driver's default) or a bracketed IPv6
    address (``[::1]``); a port, if given, is a whole number from 1 to 65535. The
    message quotes the URL part with its password masked.
    """
    netloc = location.split("/", 1)[0].rpartition("@")[2]
    for entry in netloc.split(","):
        host, port = entry, None
        if entry.startswith("["):
            close = entry.find("]")
            if close < 0:
                raise ValueError(f"host {entry!r}: an IPv6 address opened with '[' needs a ']'")
            host, rest = entry[: close + 1], entry[close + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise ValueError(f"host {entry!r}: expected ':PORT' after {host!r}")
                port = rest[1:]
        elif "]" in entry or "[" in entry:
            raise ValueError(f"host {entry!r}: brackets only go around a whole IPv6 address")
        elif ":" in entry:
            host, _, port = entry.partition(":")
        if port is not None and not (
            port.isascii() and port.isdigit() and 1 <= int(port) <= MAX_PORT
        ):
            raise ValueError(
                f"port {port!r} of host {host!r}: a port is a whole number from 1 to {MAX_PORT}"
            )
