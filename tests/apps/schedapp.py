"""A workflow for schedule tests across processes (``wf worker tests.apps.schedapp``)."""

from __future__ import annotations

from workflow import workflow


@workflow
async def scheduled_tick(label: str) -> str:
    return label
