"""The schedules page: every schedule, its next fires and recent runs, and its actions."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from workflow.schedules import get_schedule, list_schedules
from workflow.ui._context import Ui

__all__ = ["SCHEDULES_SHOWN", "schedules_page"]

SCHEDULES_SHOWN = 100
"""Schedules listed on the page (in id order); the CLI lists them all."""
RECENT_SHOWN = 5
"""Recent runs shown per schedule."""
FIRES_SHOWN = 3
"""Next fire times shown per schedule."""


async def schedules_page(ui: Ui, request: Request) -> Response:
    """``/schedules``: each schedule's spec, state, next fires and newest runs."""
    rows: list[dict[str, Any]] = []
    more = False
    async for schedule in list_schedules(world=ui.world):
        if len(rows) == SCHEDULES_SHOWN:
            more = True
            break
        info = await get_schedule(schedule.id, world=ui.world).describe()
        recent = []
        for run_id in info.recent_run_ids[:RECENT_SHOWN]:
            record = await ui.world.get_run(run_id)
            recent.append((run_id, record.status.value if record is not None else "pruned"))
        rows.append({"info": info, "fires": info.next_fire_times[:FIRES_SHOWN], "recent": recent})
    return ui.page(request, "schedules.html", rows=rows, more=more)
