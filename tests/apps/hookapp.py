"""A workflow that waits for an approval hook (for cross-process hook tests)."""

from __future__ import annotations

from typing import Any

from workflow import create_hook, workflow


@workflow
async def needs_approval(token: str) -> Any:
    return await create_hook(token, attributes={"kind": "approval"})
