"""The waterfall, the charts, the flow-control view and the schedules page in headless
Chromium, over memory, SQLite and PostgreSQL worlds, with no CSP violation.

The policy forbids inline script and style, so every bar is a ``<rect>`` with
its geometry in attributes and its colour from the stylesheet; the browser's
console must report no violation on any of these pages (and does report one
when the test itself breaks the rule, so the check can fail).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

from tests.apps.uiapp import approval, checkout, fanout, pipeline
from tests.browser import browser, csp_violations, follow, read, wait
from tests.system.test_ui_browser import served, ui_url
from tests.ui_server import UiServer
from workflow import Limited, list_hooks, start
from workflow.schedules import create_schedule, get_schedule

__all__ = ["browser", "served", "ui_url"]


def _tones(driver: webdriver.Chrome, selector: str) -> list[str]:
    """The ``data-tone`` of each element ``selector`` finds, read in one script call, so a
    live refresh swapping the region cannot leave a stale element half-way."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.tone);"
    return [str(tone) for tone in driver.execute_script(script, selector)]


def _statuses(driver: webdriver.Chrome, selector: str) -> set[str]:
    """The ``data-status`` of each element ``selector`` finds, in one script call."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.dataset.status);"
    return {str(status) for status in driver.execute_script(script, selector)}


def _texts(driver: webdriver.Chrome, selector: str) -> list[str]:
    """The text of each element ``selector`` finds, in one script call (see ``_tones``)."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);"
    return [str(text) for text in driver.execute_script(script, selector)]


def test_the_waterfall_charts_and_schedules_render_without_csp_violations(
    served: UiServer, browser: webdriver.Chrome
) -> None:
    world = served.world

    async def seed() -> dict[str, str]:
        done = await start(checkout, "c-1", 100, world=world)
        await done.result(timeout=60)
        many = await start(fanout, 150, world=world)
        await many.result(timeout=120)
        piped = await start(pipeline, "o-7", world=world)
        while not await list_hooks(run_id=piped.id, world=world):
            await asyncio.sleep(0.05)
        for n in range(3):
            await start(approval, f"q-{n}", attributes={"tenant": Limited("acme", 2)}, world=world)
        await create_schedule(
            checkout, "c-s", 5, id="nightly", every=timedelta(hours=6), world=world
        )
        return {"done": done.id, "many": many.id, "piped": piped.id}

    ids = served.call(seed())
    browser.delete_all_cookies()
    browser.get(served.base + "/")
    csp_violations(browser)  # start from an empty log

    # The list's charts: runs started and closed per minute, filled by ui.js.
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-created rect"))

    # read whole, again if a live refresh swapped a chart between finding and reading it
    def total(chart: str) -> int:
        found = browser.find_element(By.ID, chart)
        return int(found.get_attribute("data-total") or 0)

    # checkout, fanout, pipeline and its child, three approvals
    assert read(browser, lambda _: total("chart-created")) == 7
    assert read(browser, lambda _: total("chart-closed")) == 3  # checkout, fanout, the child
    script = (
        "return [...document.querySelectorAll('#chart-closed rect')].map(e => e.dataset.status);"
    )
    assert "completed" in set(browser.execute_script(script))
    day = browser.find_element(By.CSS_SELECTOR, "#chart-windows a[data-window='day']")
    follow(browser, day)
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-created rect"))
    assert "last day" in browser.find_element(By.ID, "chart-created").text

    # A run's waterfall: the retry and the success of one step, the timer, hold, child, hook.
    browser.get(served.base + f"/runs/{ids['piped']}")
    labels = _texts(browser, "#waterfall text.row-label")
    assert labels[0] == "1. charge"
    assert any(label.startswith("hold warehouse") for label in labels), labels
    assert any(label.startswith("child countdown") for label in labels), labels
    assert any(label.startswith("hook pipeline-o-7") for label in labels), labels
    assert _tones(browser, "#waterfall rect.bar")[:2] == ["retry", "ok"]
    assert "open" in _tones(browser, "#waterfall rect.bar")  # the hook it still waits on

    # 150 steps: a window of rows, the rest folded, paged by link.
    browser.get(served.base + f"/runs/{ids['many']}")
    svg = browser.find_element(By.ID, "waterfall-svg")
    assert svg.get_attribute("data-total-rows") == "150"
    assert int(svg.get_attribute("data-rows") or 0) == 61  # 60 rows and the folded rest
    follow(browser, browser.find_element(By.ID, "wf-next"))
    folded = _texts(browser, "#waterfall text.row-label.folded")
    assert folded == ["60 rows before", "30 rows after"]

    # The flow-control view: holders and waiters per value of a limited key.
    browser.get(served.base + "/flow?key=tenant")
    row = browser.find_element(By.CSS_SELECTOR, "#flow-values tr.flow-value[data-value='acme']")
    assert row.find_element(By.CSS_SELECTOR, ".holders").text == "2"
    assert row.find_element(By.CSS_SELECTOR, ".waiters").text == "1"
    assert set(_tones(browser, "#flow-chart rect")) == {"holders", "waiters"}
    # ... and over time: a strip per value from the world's slot history
    strip = browser.find_element(By.CSS_SELECTOR, "#flow-history-svg g.track[data-value='acme']")
    assert strip.get_attribute("data-peak-holders") == "2"
    assert strip.get_attribute("data-peak-waiters") == "1"
    assert set(_tones(browser, "#flow-history-svg g.track[data-value='acme'] rect")) == {
        "holders",
        "waiters",
    }
    follow(browser, browser.find_element(By.CSS_SELECTOR, "#flow-windows a[data-window='day']"))
    wait(browser).until(
        lambda d: d.find_element(By.ID, "flow-history").get_attribute("data-window") == "day"
    )
    assert _texts(browser, "#flow-history-svg text.track-label")[0].startswith("acme")

    # The schedules page: next fires; pause (confirmed) and trigger (confirmed).
    browser.get(served.base + "/schedules")
    schedule = browser.find_element(By.CSS_SELECTOR, "tr.schedule[data-schedule='nightly']")
    assert schedule.find_elements(By.CSS_SELECTOR, ".fires .time")
    follow(browser, schedule.find_element(By.CSS_SELECTOR, "button.schedule-pause"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Pause schedule nightly?"
    follow(browser, browser.find_element(By.ID, "confirm-button"))
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: (
            d.find_element(By.CSS_SELECTOR, "tr.schedule").get_attribute("data-paused") == "yes"
        )
    )
    assert served.call(get_schedule("nightly", world=world).describe()).paused
    follow(browser, browser.find_element(By.CSS_SELECTOR, "button.schedule-trigger"))
    follow(browser, browser.find_element(By.ID, "confirm-button"))
    assert "/runs/" in browser.current_url  # the run the fire started
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.ID, "run-status").text.strip() == "completed"
    )
    browser.get(served.base + "/schedules")
    # the fire's run shows among the recent ones once the page's live parts have loaded
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "tr.schedule .recent a.chip")
    )

    assert csp_violations(browser) == []
    # the check can fail: an inline style attribute is refused and reported
    browser.execute_script("document.body.setAttribute('style', 'color: red')")
    wait(browser).until(lambda d: _reported(d))


_seen: list[str] = []


def _reported(driver: webdriver.Chrome) -> bool:
    _seen.extend(csp_violations(driver))
    return any("style" in message for message in _seen)


def test_the_waterfall_follows_a_running_run_live(
    served: UiServer, browser: webdriver.Chrome
) -> None:
    run = served.call(start(approval, "o-live", world=served.world))
    browser.delete_all_cookies()
    browser.get(served.base + f"/runs/{run.id}")
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: (
            "hook approve-o-live"
            in [e.text for e in d.find_elements(By.CSS_SELECTOR, "#waterfall text.row-label")]
        )
    )
    browser.execute_script("window.wfNoReload = 1")
    served.call(_resume("approve-o-live", served))
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: (
            "open" not in _tones(d, "#waterfall rect.bar")
            and d.find_element(By.ID, "run-status").text.strip() == "completed"
        )
    )
    assert browser.execute_script("return window.wfNoReload;") == 1  # swapped, not reloaded
    assert csp_violations(browser) == []


async def _resume(token: str, served: UiServer) -> None:
    from workflow import resume_hook

    await resume_hook(token, {"approved": True}, world=served.world)
