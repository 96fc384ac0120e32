"""The pages that only read: the run list, a run's details, and their JSON twins."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any
from urllib.parse import quote, quote_plus

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from workflow.client import RunList, find_run, get_run, list_runs, list_workers
from workflow.errors import QuerySyntaxError
from workflow.query import And, AttrRef, Compare, Expr, parse
from workflow.query import format as format_query
from workflow.ui._context import PAGE_SIZE, Ui
from workflow.ui._paths import app_url
from workflow.ui._waterfall import layout, svg_context
from workflow.views import (
    EventWindow,
    RunDetails,
    decode_payload,
    event_summary,
    format_duration,
    gather_details,
    run_to_json,
)
from worlds.types import (
    EventKind,
    RunContinued,
    RunRecord,
    RunStatus,
    StepCompleted,
    StepFailed,
    StepRetrying,
    StepStarted,
)

__all__ = [
    "counts_fragment",
    "run_by_pair",
    "run_json",
    "run_page",
    "runs_json",
    "runs_page",
    "workers_page",
]

CHART_WINDOWS = ("hour", "day")
"""The windows the list's charts offer (``_chart_pages.WINDOWS``)."""
CHAIN_SHOWN = 20
"""Runs of a continue-as-new chain the detail page follows before it stops."""
RESULT_SHOWN = 20_000
"""Characters of a result or payload shown in a page (the JSON API has all)."""


_FIELDS = ("q", "status", "workflow", "cursor")


@lru_cache(maxsize=4096)
def _encoded(value: str) -> str:
    return quote_plus(value)


@dataclass(frozen=True)
class Filter:
    """The list's filters, as they appear in its URL (so a search can be shared)."""

    q: str = ""
    status: str = ""
    workflow: str = ""
    cursor: str = ""

    @classmethod
    def of(cls, request: Request) -> Filter:
        """The filters in ``request``'s query string."""
        params = request.query_params
        return cls(
            params.get("q", "").strip(),
            params.get("status", "").strip(),
            params.get("workflow", "").strip(),
            params.get("cursor", "").strip(),
        )

    def url(self, **changes: str) -> str:
        """This list's URL with ``changes`` (and the cursor dropped unless given)."""
        parts = []
        for name in _FIELDS:
            value = changes.get(name, "" if name == "cursor" else getattr(self, name))
            if value:
                parts.append(f"{name}={_encoded(value)}")
        return "/?" + "&".join(parts) if parts else "/"

    @cached_property
    def parsed(self) -> Expr | None:
        """The query's tree, or None if there is none or it is malformed."""
        try:
            return parse(self.q) if self.q else None
        except QuerySyntaxError:
            return None

    def with_term(self, key: str, value: Any) -> str:
        """The URL that also requires attribute ``key`` = ``value`` (an attribute chip)."""
        term: Expr = Compare(AttrRef(key), "=", value)
        combined = term if self.parsed is None else And((self.parsed, term))
        return self.url(q=format_query(combined))

    async def page(self, ui: Ui, limit: int = PAGE_SIZE) -> RunList:
        """The runs this filter selects, one page.

        Raises:
            QuerySyntaxError: ``q`` is malformed.
            ValueError: an unknown status or a bad cursor.
            NotImplementedError: the world cannot serve the query.
        """
        return await list_runs(
            workflow=self.workflow or None,
            status=self.status or None,
            query=self.q or None,
            cursor=self.cursor or None,
            limit=limit,
            world=ui.world,
        )


async def _select(ui: Ui, chosen: Filter, limit: int = PAGE_SIZE) -> RunList | str:
    """A page of the runs ``chosen`` selects, or the message saying why there is none."""
    try:
        return await chosen.page(ui, limit)
    except QuerySyntaxError as exc:
        return f"malformed query: {exc}"
    except NotImplementedError as exc:
        return f"this world cannot serve that query: {exc}"
    except ValueError as exc:
        return str(exc)


async def runs_page(ui: Ui, request: Request) -> Response:
    """``/``: runs, newest first, filtered by ``q``, ``status`` and ``workflow``."""
    chosen = Filter.of(request)
    window = request.query_params.get("window", "hour")
    selected = await _select(ui, chosen)
    page, error = (None, selected) if isinstance(selected, str) else (selected, None)
    records = [run.record for run in page or [] if run.record is not None]
    return ui.page(
        request,
        "runs.html",
        400 if error else 200,
        filter=chosen,
        records=records,
        error=error,
        next_url=chosen.url(cursor=page.next_cursor) if page and page.next_cursor else None,
        statuses=[status.value for status in RunStatus],
        chart_windows=CHART_WINDOWS,
        chart_window=window if window in CHART_WINDOWS else "hour",
    )


async def workers_page(ui: Ui, request: Request) -> Response:
    """``/workers``: the registered workers, live and dead, and the work each holds."""
    workers = await list_workers(world=ui.world)
    return ui.page(request, "workers.html", workers=workers)


async def counts_fragment(ui: Ui, request: Request) -> Response:
    """``/fragments/counts``: runs per status in the whole world, as links to filter."""
    counts = list((await ui.counts()).items())
    return ui.page(request, "counts.html", counts=counts, filter=Filter.of(request))


async def runs_json(ui: Ui, request: Request) -> Response:
    """``/api/runs``: the document ``wf runs list --json`` prints."""
    chosen = Filter.of(request)
    limit_text = request.query_params.get("limit", str(PAGE_SIZE))
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= 1000:
        return ui.error(request, 400, f"limit must be 1-1000, got {limit_text!r}")
    page = await _select(ui, chosen, int(limit_text))
    if isinstance(page, str):
        return ui.error(request, 400, page)
    records = [run.record for run in page if run.record is not None]
    return ui.json(
        {
            "runs": [run_to_json(record, result=False) for record in records],
            "next_cursor": page.next_cursor,
        }
    )


async def _details(ui: Ui, request: Request) -> RunDetails | str:
    """The run's details, or why ``?events=`` cannot be read."""
    try:
        window = EventWindow.parse(request.query_params.get("events"))
    except ValueError as exc:
        return str(exc).replace("--events", "events=")
    return await gather_details(get_run(request.path_params["run_id"], world=ui.world), window)


async def run_json(ui: Ui, request: Request) -> Response:
    """``/api/runs/{id}``: the document ``wf runs show --json`` prints (``?events=all``)."""
    details = await _details(ui, request)
    if isinstance(details, str):
        return ui.error(request, 400, details)
    return ui.json(details.to_json())


async def _chain(ui: Ui, record: RunRecord, events: list[EventKind]) -> list[RunRecord]:
    """The runs this one continued as, in order (at most ``CHAIN_SHOWN``)."""
    chain: list[RunRecord] = []
    last = events[-1] if events else None
    while isinstance(last, RunContinued) and len(chain) < CHAIN_SHOWN:
        following = await ui.world.get_run(last.next_run_id)
        if following is None:
            break
        chain.append(following)
        if following.status is not RunStatus.CONTINUED:
            break
        tail = await ui.world.read_events(following.id, after_seq=following.last_seq - 1)
        last = tail[-1] if tail else None
    return chain


def _shown(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    if len(text) > RESULT_SHOWN:
        text = f"{text[:RESULT_SHOWN]}\n… ({len(text) - RESULT_SHOWN} more characters in the API)"
    return text


_TONE = {
    "step_retrying": "warn",
    "step_failed": "bad",
    "run_failed": "bad",
    "attribute_conflict": "warn",
    "hook_conflict": "warn",
    "run_cancel_requested": "cancel",
    "run_cancelled": "cancel",
    "step_discarded": "cancel",
    "run_completed": "good",
    "step_completed": "good",
}


async def run_page(ui: Ui, request: Request) -> Response:
    """``/runs/{id}``: status, attributes, claims, chain, steps, hooks and the timeline."""
    details = await _details(ui, request)
    if isinstance(details, str):
        return ui.error(request, 400, details)
    record = details.record
    run = get_run(record.id, world=ui.world)
    claims = await run.claims()
    shown, omitted = details.window.select(details.events)
    started = {
        (event.step, event.attempt): event.at
        for event in details.events
        if isinstance(event, StepStarted)
    }
    timeline = []
    for event in shown:
        kind = str(type(event).__struct_config__.tag)
        offset = max(0.0, (event.at - record.created_at).total_seconds())
        summary = event_summary(event)
        if isinstance(event, (StepCompleted, StepRetrying, StepFailed)):
            began = started.get((event.step, event.attempt))
            if began is not None:
                took = max(0.0, (event.at - began).total_seconds())
                summary = f"{summary} · took {format_duration(took)}"
        timeline.append(
            {
                "seq": event.seq,
                "at": event.at,
                "offset": offset,
                "kind": kind,
                "summary": summary,
                "tone": _TONE.get(kind, ""),
                "gap_before": omitted is not None and event.seq == omitted[1] + 1,
            }
        )
    page_text = request.query_params.get("wpage", "0")
    waterfall = layout(
        details.events,
        record.created_at,
        ui.world.now(),
        page=int(page_text) if page_text.isdigit() else 0,
    )
    return ui.page(
        request,
        "run.html",
        waterfall=waterfall,
        **svg_context(waterfall),
        details=details,
        record=record,
        claims=claims,
        chain=await _chain(ui, record, details.events),
        timeline=timeline,
        omitted=omitted,
        result=None if record.result is None else _shown(decode_payload(record.result)),
        list_filter=Filter(),
        waiting_hooks=[h for h in details.hooks if h.status == "waiting"],
    )


async def run_by_pair(ui: Ui, request: Request) -> Response:
    """``/runs/by/{key}/{value}``: redirect to the run holding the unique pair.

    ``value`` is tried as text first, then as a JSON number or ``true``/``false``.
    """
    key, text = request.path_params["key"], request.path_params["value"]
    candidates: list[Any] = [text]
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, (bool, int, float)) and parsed is not None:
        candidates.append(parsed)
    for value in candidates:
        try:
            holder = await find_run(key, value, world=ui.world)
        except (TypeError, ValueError) as exc:
            return ui.error(request, 400, str(exc))
        if holder is not None:
            target = app_url(request.scope, f"/runs/{quote(holder.id, safe='')}")
            return RedirectResponse(target, status_code=303)
    return ui.error(request, 404, f"no run holds the unique pair {key}={text}")
