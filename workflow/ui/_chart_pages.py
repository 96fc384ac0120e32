"""The chart pages: runs started and closed per minute (a fragment of the list), and
the flow-control view (holders and waiters per value of a limited key)."""

from __future__ import annotations

from datetime import UTC, timedelta

from starlette.requests import Request
from starlette.responses import Response

from workflow.errors import QuerySyntaxError
from workflow.query import parse
from workflow.ui._charts import (
    CHART_HEIGHT,
    CHART_WIDTH,
    TRACK_HEIGHT,
    bucket_totals,
    levels,
    stacked,
    tracks,
)
from workflow.ui._context import Ui
from workflow.ui._pages import Filter
from worlds.query import CountField, RunCount, RunQuery
from worlds.types import RunStatus

__all__ = ["FLOW_WINDOWS", "WINDOWS", "flow_page", "runs_chart"]

WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 600)}
"""The chart windows the list offers: their length and bucket width in seconds. A day
is drawn per 10 minutes: 144 bars a chart (1,440 per-minute bars, thinner than a pixel
at the chart's width, made the fragment 1.3 MB and most of its server time at 1,000,000
runs; the counts are the world's per bucket either way)."""
FLOW_WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 900)}
"""The flow view's history windows: a bar per minute of the hour, per quarter of the day
(a strip per value: 96 bars, not 1,440, keep a day's page small)."""
FIELDS: tuple[tuple[CountField, str], ...] = (("created", "started"), ("closed", "closed"))
"""The two charts of the list: the time each counts runs by, and its title."""
VALUES_SHOWN = 200
"""Values of a limited key the flow view draws."""
SLOTS_READ = 5000
"""Slot rows of one key the flow view reads."""
TRACKS_SHOWN = 20
"""Values of a limited key the flow view's history draws (those that saw the most)."""


def _query(chosen: Filter) -> RunQuery:
    """The ``RunQuery`` of the list's filters (as ``list_runs`` builds it).

    Raises:
        QuerySyntaxError: the query text is malformed.
        ValueError: an unknown status.
    """
    return RunQuery(
        workflow=chosen.workflow or None,
        statuses=frozenset({RunStatus(chosen.status)}) if chosen.status else None,
        where=parse(chosen.q) if chosen.q else None,
    )


async def runs_chart(ui: Ui, request: Request) -> Response:
    """``/fragments/chart``: runs started and closed per minute, by status, for the
    list's filters over the last hour (``window=hour``) or day (``window=day``)."""
    chosen = Filter.of(request)
    window = request.query_params.get("window", "hour")
    if window not in WINDOWS:
        return ui.error(request, 400, f"window must be one of {sorted(WINDOWS)}, got {window!r}")
    try:
        query = _query(chosen)
    except (QuerySyntaxError, ValueError) as exc:
        return ui.page(request, "chart.html", 200, charts=[], error=str(exc), window=window)
    length, width = WINDOWS[window]
    now = ui.world.now().astimezone(UTC)
    until = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - length
    buckets = int(length.total_seconds()) // width
    charts = []
    found: dict[CountField, list[RunCount]] = {}
    for field, _ in FIELDS:
        key = ("chart", chosen, window, field, until)

        async def count(field: CountField = field) -> list[RunCount]:
            return await ui.world.count_runs(query, field, since, until, width)

        try:
            found[field] = await ui.reuse(key, count)
        except NotImplementedError as exc:
            return ui.page(request, "chart.html", 200, charts=[], error=str(exc), window=window)
    top = max(max(bucket_totals(counts).values(), default=0) for counts in found.values())
    span = "this minute" if width == 60 else f"these {width // 60} minutes"
    for field, title in FIELDS:
        counts = found[field]
        charts.append(
            {
                "field": field,
                "title": title,
                "total": sum(c.count for c in counts),
                "bars": stacked(counts, buckets, f"{title} in {span}", top=top),
                "statuses": sorted({c.status.value for c in counts}),
            }
        )
    return ui.page(
        request,
        "chart.html",
        charts=charts,
        error=None,
        window=window,
        top=top,
        since=since,
        until=until,
        width=CHART_WIDTH,
        height=CHART_HEIGHT,
        bucket="minute" if width == 60 else f"{width // 60} min",
        filter=chosen,
        windows=list(WINDOWS),
    )


async def flow_page(ui: Ui, request: Request) -> Response:
    """``/flow?key=K``: for limited key ``K``, holders and waiters per value now, and
    over the last hour (``window=hour``) or day (``window=day``) from the world's
    slot history (``World.slot_history``: a sample per pair and minute it changed)."""
    key = request.query_params.get("key", "").strip()
    window = request.query_params.get("window", "hour")
    if window not in FLOW_WINDOWS:
        choices = sorted(FLOW_WINDOWS)
        return ui.error(request, 400, f"window must be one of {choices}, got {window!r}")
    if not key:
        return ui.page(
            request,
            "flow.html",
            key="",
            levels=[],
            bars=[],
            height=0,
            more=False,
            tracks=[],
            window=window,
            windows=list(FLOW_WINDOWS),
        )
    slots = await ui.world.list_key_slots(key, SLOTS_READ)
    found, bars = levels(slots, VALUES_SHOWN)
    length, width = FLOW_WINDOWS[window]
    until = ui.world.now().astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - length
    buckets = int(length.total_seconds()) // width
    try:
        samples = await ui.world.slot_history(key, since, until, width)
        history_error = None
    except NotImplementedError as exc:  # a third-party world without slot history
        samples, history_error = [], str(exc)
    drawn = tracks(samples, since, width, buckets, TRACKS_SHOWN)
    return ui.page(
        request,
        "flow.html",
        key=key,
        levels=found,
        bars=bars,
        width=CHART_WIDTH,
        height=max(len(found), 1) * 20 + 4,
        more=len(slots) >= SLOTS_READ,
        tracks=drawn,
        track_height=TRACK_HEIGHT,
        history_height=len(drawn) * TRACK_HEIGHT + 14,
        history_error=history_error,
        since=since,
        until=until,
        window=window,
        windows=list(FLOW_WINDOWS),
        bucket_minutes=width // 60,
    )
