"""The charts, the flow-control view and the schedules page over HTTP, on every world:
their counts agree with the runs, the schedule actions keep the CSRF, confirmation,
read-only and token rules, and the chart geometry stays inside the plot."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.api.test_ui import served, ui_url
from tests.apps.uiapp import approval, checkout
from tests.ui_server import UiServer
from workflow import Limited, list_hooks, start
from workflow.schedules import create_schedule, get_schedule
from workflow.ui._charts import CHART_HEIGHT, CHART_WIDTH, TRACK_HEIGHT, stacked, tracks
from worlds.query import RunCount
from worlds.types import RunStatus, SlotSample

__all__ = ["served", "ui_url"]


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def _total(fragment: str, field: str) -> int:
    found = re.search(rf'id="chart-{field}" data-total="(\d+)"', fragment)
    assert found is not None, fragment
    return int(found.group(1))


def test_the_chart_counts_the_selected_runs(served: UiServer) -> None:
    async def seed() -> None:
        for n in range(3):
            run = await start(checkout, f"c-{n}", 1, attributes={"tier": n % 2}, world=served.world)
            await run.result(timeout=60)
        waiting = await start(approval, "o-1", attributes={"tier": 1}, world=served.world)
        while not await list_hooks(run_id=waiting.id, world=served.world):
            await asyncio.sleep(0.02)  # until a worker runs it: pending is not running

    served.call(seed())
    status, headers, chart = served.get("/fragments/chart?window=hour")
    assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
    assert (_total(chart, "created"), _total(chart, "closed")) == (4, 3)
    assert 'data-status="completed"' in chart and "style=" not in chart
    _, _, tier = served.get("/fragments/chart?" + urlencode({"q": "tier = 1", "window": "day"}))
    assert (_total(tier, "created"), _total(tier, "closed")) == (2, 1)
    _, _, running = served.get("/fragments/chart?status=running")
    assert (_total(running, "created"), _total(running, "closed")) == (1, 0)
    _, _, bad = served.get("/fragments/chart?" + urlencode({"q": "tier ="}))
    assert 'id="chart-error"' in bad
    status, _, _ = served.get("/fragments/chart?window=year")
    assert status == 400
    _, _, listing = served.get("/?" + urlencode({"q": "tier = 1", "window": "day"}))
    assert 'data-src="/fragments/chart?q=tier+%3D+1&amp;window=day"' in listing


def test_the_flow_view_shows_holders_and_waiters_per_value(served: UiServer) -> None:
    async def seed() -> None:
        for n, tenant in enumerate(["acme", "acme", "acme", "bolt"]):
            limited = Limited(tenant, 2)
            await start(approval, f"f-{n}", attributes={"tenant": limited}, world=served.world)

    served.call(seed())
    status, _, page = served.get("/flow?key=tenant")
    assert status == 200
    rows = re.findall(
        r'data-value="(\w+)"><td>\w+</td><td class="holders">(\d+)</td>'
        r'<td class="waiters">(\d+)</td><td>(\d+)</td>',
        page,
    )
    assert rows == [("acme", "2", "1", "2"), ("bolt", "1", "0", "2")]
    # the history: a strip per value, the most holders and waiters it saw this hour
    strips = re.findall(
        r'<g class="track" data-value="(\w+)" data-peak-holders="(\d+)" '
        r'data-peak-waiters="(\d+)">',
        page,
    )
    assert strips == [("acme", "2", "1"), ("bolt", "1", "0")]
    assert 'id="flow-history" data-window="hour"' in page
    _, _, day = served.get("/flow?key=tenant&window=day")
    assert 'id="flow-history" data-window="day"' in day
    assert re.findall(r'<g class="track" data-value="(\w+)"', day) == ["acme", "bolt"]
    status, _, _ = served.get("/flow?key=tenant&window=year")
    assert status == 400
    _, _, empty = served.get("/flow?key=nobody")
    assert 'id="flow-empty"' in empty
    assert 'id="flow-history-empty"' in empty


def test_a_history_strip_carries_a_level_into_buckets_without_samples() -> None:
    """A pair sampled once before the window stands at that level in every bucket; a
    bucket's bar is the most it saw; a pair that stood empty is left out."""
    since = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)

    def sample(value: str, minutes: int, levels: tuple[int, int, int, int]) -> SlotSample:
        held, waiting, most_held, most_waiting = levels
        return SlotSample(
            key="k",
            ivalue=f"s:{value}",
            minute=since + timedelta(minutes=minutes),
            holders=held,
            waiters=waiting,
            peak_holders=most_held,
            peak_waiters=most_waiting,
        )

    samples = [
        sample("old", -30, (2, 0, 2, 0)),  # held since before the window, never changed
        sample("busy", 3, (1, 4, 3, 5)),
        sample("busy", 7, (0, 0, 1, 4)),
        sample("gone", -5, (0, 0, 1, 0)),
    ]
    drawn = tracks(samples, since, 60, 10, 20)
    assert [(t.value, t.peak_holders, t.peak_waiters) for t in drawn] == [
        ("busy", 3, 5),
        ("old", 2, 0),
    ]
    busy, old = drawn
    held = [b for b in old.bars if b.tone == "holders"]
    assert len(held) == 10 and len({b.height for b in held}) == 1
    busy_bars = {(round(b.x / (CHART_WIDTH / 10)), b.tone) for b in busy.bars}
    # buckets 3..6 stand at (1, 4) after the peak; from 7 on, empty
    assert {n for n, tone in busy_bars if tone == "waiters"} == {3, 4, 5, 6, 7}
    assert {n for n, tone in busy_bars if tone == "holders"} == {3, 4, 5, 6, 7}
    assert max(b.y + b.height for b in busy.bars) <= 2 * TRACK_HEIGHT
    with pytest.raises(ValueError):
        tracks(samples, since, 60, 0, 20)


def test_schedule_actions_need_the_csrf_token_and_a_confirmation(served: UiServer) -> None:
    served.call(
        create_schedule(
            checkout, "c", 1, id="every-6h", every=timedelta(hours=6), world=served.world
        )
    )
    status, _, page = served.get("/schedules")
    assert status == 200 and 'data-schedule="every-6h" data-paused="no"' in page
    csrf = _csrf(page)
    path = "/schedules/every-6h/pause"
    status, _, _ = served.get(path, data=urlencode({"confirm": "yes"}).encode())
    assert status == 403
    status, _, _ = served.get(
        path,
        data=urlencode({"csrf": csrf, "confirm": "yes"}).encode(),
        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert status == 403
    status, _, confirm = served.get(path, data=urlencode({"csrf": csrf}).encode())
    assert status == 200 and "yes, pause it" in confirm
    assert not served.call(get_schedule("every-6h", world=served.world).describe()).paused
    status, headers, _ = served.get(path, data=urlencode({"csrf": csrf, "confirm": "yes"}).encode())
    assert (status, headers["location"]) == (303, "/schedules")
    assert served.call(get_schedule("every-6h", world=served.world).describe()).paused
    trigger = urlencode({"csrf": csrf, "confirm": "yes"}).encode()
    status, headers, _ = served.get("/schedules/every-6h/trigger", data=trigger)
    assert status == 303 and headers["location"].startswith("/runs/")
    status, _, _ = served.get("/schedules/every-6h/explode", data=trigger)
    assert status == 404
    status, _, _ = served.get("/schedules/nope/pause", data=trigger)
    assert status == 404

    async def recent() -> list[str]:
        for _ in range(600):
            info = await get_schedule("every-6h", world=served.world).describe()
            if info.recent_run_ids:
                return info.recent_run_ids
            await asyncio.sleep(0.05)
        return []

    (run_id,) = served.call(recent())
    _, _, page = served.get("/schedules")
    assert f"/runs/{run_id}" in page and 'data-paused="yes"' in page


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_read_only_hides_and_refuses_schedule_actions(ui_url: str) -> None:
    with UiServer(ui_url, read_only=True) as server:
        server.call(
            create_schedule(
                checkout, "c", 1, id="s-ro", every=timedelta(hours=1), world=server.world
            )
        )
        _, _, page = server.get("/schedules")
        assert "schedule-pause" not in page and 'data-schedule="s-ro"' in page
        status, _, _ = server.get("/schedules/s-ro/pause", data=b"confirm=yes")
        assert status in (404, 405)
        assert not server.call(get_schedule("s-ro", world=server.world).describe()).paused


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_a_token_guards_the_new_pages(ui_url: str) -> None:
    with UiServer(ui_url, token="s3cret-token", worker=False) as server:
        for path in ("/schedules", "/flow?key=k", "/fragments/chart"):
            status, headers, _ = server.get(path)
            assert status == 303 and headers["location"].startswith("/login"), path
        status, _, _ = server.get("/schedules", headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200


COUNTS = st.lists(
    st.builds(
        RunCount,
        bucket=st.integers(-5, 70),
        status=st.sampled_from(list(RunStatus)),
        count=st.integers(0, 10_000),
    ),
    max_size=80,
)


@given(COUNTS, st.integers(1, 1440), st.none() | st.integers(0, 50_000))
def test_stacked_bars_stay_inside_the_plot(
    counts: list[RunCount], buckets: int, top: int | None
) -> None:
    bars = stacked(counts, buckets, "runs", top=top)
    for bar in bars:
        assert bar.width >= 0 and bar.height >= 0
        assert bar.x >= 0 and bar.x + bar.width <= CHART_WIDTH + 1e-6
        assert bar.y >= -1e-6 and bar.y + bar.height <= CHART_HEIGHT + 1e-6
    shown = [c for c in counts if 0 <= c.bucket < buckets and c.count > 0]
    assert len(bars) == len(shown)
