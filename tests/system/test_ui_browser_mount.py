"""The web UI mounted under a prefix (``Mount("/wf", app)``) in headless Chromium:
its stylesheet, script, fragments, links, forms and redirects all stay under it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from tests.apps.uiapp import approval
from tests.browser import browser, wait
from tests.system.test_ui_browser import ui_url
from tests.ui_server import UiServer
from workflow import start

__all__ = ["browser", "ui_url"]

PREFIX = "/wf"


@pytest.fixture
def served(ui_url: str) -> Iterator[UiServer]:
    with UiServer(ui_url, prefix=PREFIX) as server:
        yield server


def _loaded(driver: webdriver.Chrome) -> list[tuple[str, int]]:
    """Each resource the page fetched (assets, fragments) and the status it got."""
    entries = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => [e.name, e.responseStatus || 0]);"
    )
    return [(str(name), int(status)) for name, status in entries]


def test_the_ui_works_under_a_prefix(served: UiServer, browser: webdriver.Chrome) -> None:
    async def seed() -> str:
        run = await start(approval, "o-mount", world=served.world)
        while not await run.claims():  # the workflow ran up to its hook
            await asyncio.sleep(0.05)
        return run.id

    run_id = served.call(seed())
    home = served.base + PREFIX
    browser.delete_all_cookies()
    browser.get(home + "/")
    wait(browser).until(  # ui.js ran and filled the counts fragment
        lambda d: d.find_elements(By.CSS_SELECTOR, "#counts a[data-status='running'] .count")
    )
    # the browser's own guess at /favicon.ico is no URL the app emits
    loaded = [(name, status) for name, status in _loaded(browser) if "favicon" not in name]
    paths = [urlsplit(name).path for name, _ in loaded]
    assert f"{PREFIX}/static/ui.css" in paths and f"{PREFIX}/static/ui.js" in paths, loaded
    assert any(path == f"{PREFIX}/fragments/counts" for path in paths), loaded
    assert all(path.startswith(f"{PREFIX}/") for path in paths), loaded
    assert all(status == 200 for _, status in loaded), loaded
    sheets = browser.execute_script("return document.styleSheets[0].cssRules.length")
    assert sheets > 0, "the stylesheet loaded"

    # a run's link, its cancel form and the confirmation all stay under the prefix
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, "a.run-link").click()
    wait(browser).until(expected_conditions.staleness_of(page))
    assert urlsplit(browser.current_url).path == f"{PREFIX}/runs/{run_id}"
    for button in ("cancel-button", "confirm-button"):
        page = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.ID, button).click()
        wait(browser).until(expected_conditions.staleness_of(page))
    assert urlsplit(browser.current_url).path == f"{PREFIX}/runs/{run_id}"
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.ID, "run-status").text.strip() == "cancelled"
    )
    page = browser.find_element(By.CSS_SELECTOR, "a.brand")
    assert urlsplit(page.get_attribute("href") or "").path == f"{PREFIX}/"
