"""World URLs as they may be shown: the one place credentials are masked.

Every message, ``repr`` and log line that names a world URL passes it through
``redact_url`` first, so ``postgresql://u:s3cret@host/db`` is only ever shown
as ``postgresql://u:***@host/db``.
"""

from __future__ import annotations

import re

__all__ = ["redact_url"]

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
