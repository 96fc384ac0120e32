"""The schedules page: every schedule, its next fires and recent runs, and its actions."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from workflow.schedules import list_schedules
from workflow.ui._context import Ui
from worlds.query import RunQuery

__all__ = ["SCHEDULES_SHOWN", "schedules_page"]

SCHEDULES_SHOWN = 100
"""Schedules listed on the page (in id order); the CLI lists them all."""
RECENT_SHOWN = 5
"""Recent runs shown per schedule."""
FIRES_SHOWN = 3
"""Next fire times shown per schedule."""
SCHEDULE_KEY = "$schedule"
"""The attribute every run a schedule starts holds: the schedule's id (brief section 4)."""


async def schedules_page(ui: Ui, request: Request) -> Response:
    """``/schedules``: each schedule's spec, state, next fires and newest runs.

    The spec and fires are the snapshot ``list_schedules`` reads (one page of
    schedule rows); the newest runs are one indexed ``list_runs`` page per
    schedule (``$schedule``), statuses included, rather than
    ``Schedule.describe()``, which also reads the last hundred completed runs
    for a result the page does not show (at 1,000,000 runs and 50 schedules
    that was most of the page's time).
    """
    rows: list[dict[str, Any]] = []
    more = False
    async for schedule in list_schedules(world=ui.world):
        if len(rows) == SCHEDULES_SHOWN:
            more = True
            break
        info = schedule.info
        assert info is not None, "list_schedules gives each handle its snapshot"
        page = await ui.world.list_runs(
            RunQuery(attributes={SCHEDULE_KEY: schedule.id}, limit=RECENT_SHOWN)
        )
        recent = [(run.id, run.status.value) for run in page.runs]
        rows.append({"info": info, "fires": info.next_fire_times[:FIRES_SHOWN], "recent": recent})
    return ui.page(request, "schedules.html", rows=rows, more=more)
