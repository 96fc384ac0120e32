"""The web UI in a real headless Chromium, over memory, SQLite and PostgreSQL worlds.

One walk through what an operator does: list, search, a malformed query, a
hostile attribute value, a run's timeline and claims, a continue-as-new chain,
a cancel and a hook resume (each confirmed), with live updates showing the
status change without a reload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from tests.apps.uiapp import approval, checkout, countdown
from tests.browser import WAIT, browser, read, wait
from tests.browser import follow as _follow
from tests.conftest import world_url
from tests.ui_server import UiServer
from workflow import Run, RunStatus, Unique, get_run, start

__all__ = ["browser"]

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def ui_url(world_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if world_kind == "postgres":
        return str(request.getfixturevalue("postgres_world_url"))
    return world_url(world_kind, tmp_path)


@pytest.fixture
def served(ui_url: str) -> Iterator[UiServer]:
    with UiServer(ui_url) as server:
        yield server


def _rows(driver: webdriver.Chrome) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "#runs tr.run")


def _row_ids(driver: webdriver.Chrome) -> list[str | None]:
    return read(driver, lambda d: [row.get_attribute("data-run") for row in _rows(d)])


def _row_texts(driver: webdriver.Chrome) -> list[str]:
    return read(driver, lambda d: [row.text for row in _rows(d)])


def _search(driver: webdriver.Chrome, query: str) -> None:
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(query)
    _follow(driver, driver.find_element(By.ID, "search-button"))


def _wait_text(driver: webdriver.Chrome, element_id: str, text: str) -> None:
    wait(driver, ignored=[StaleElementReferenceException]).until(
        lambda d: d.find_element(By.ID, element_id).text.strip() == text
    )


def test_an_operator_walks_through_the_ui(served: UiServer, browser: webdriver.Chrome) -> None:
    world = served.world

    async def seed() -> dict[str, str]:
        runs: dict[str, Run[Any]] = {
            "c-1": await start(checkout, "c-1", 100, attributes={"customer": "c-1"}, world=world),
            "c-2": await start(checkout, "c-2", 250, attributes={"customer": "c-2"}, world=world),
            "hostile": await start(
                checkout, "h", 1, attributes={"customer": HOSTILE, "tier": 2}, world=world
            ),
            "chain": await start(countdown, 2, attributes={"job": Unique("count")}, world=world),
        }
        for run in runs.values():
            await run.result(timeout=WAIT)
        runs["o-1"] = await start(approval, "o-1", world=world)
        runs["o-2"] = await start(approval, "o-2", world=world)
        for key in ("o-1", "o-2"):
            while not (await runs[key].claims()):
                await runs[key].status()
                await asyncio.sleep(0.05)
        return {name: run.id for name, run in runs.items()}

    ids = served.call(seed())
    browser.delete_all_cookies()

    # The list: every run, newest first, with counts per status.
    browser.get(served.base + "/")
    listed = _row_ids(browser)
    assert len(listed) == 8  # three runs of the countdown chain
    assert listed[0] == ids["o-2"]
    wait(browser).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#counts a[data-status='completed'] .count")
    )
    completed = read(
        browser,
        lambda d: d.find_element(By.CSS_SELECTOR, "#counts a[data-status='completed'] .count").text,
    )
    assert completed == "4"  # the chain's first two runs are "continued"

    # A query filters the rows, and lands in the URL (bookmarkable).
    _search(browser, "customer = 'c-2'")
    assert _row_ids(browser) == [ids["c-2"]]
    assert parse_qs(urlsplit(browser.current_url).query)["q"] == ["customer = 'c-2'"]

    # A malformed query shows the caret error in the page.
    _search(browser, "customer = 'c-2' AND")
    error = browser.find_element(By.ID, "query-error").text
    assert "malformed query" in error
    assert error.splitlines()[-1].strip() == "^"
    assert not _row_ids(browser)

    # A hostile attribute value is shown as text, never run.
    _search(browser, "tier = 2")
    (row_text,) = _row_texts(browser)
    assert HOSTILE in row_text
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check
    assert browser.find_elements(By.CSS_SELECTOR, "#runs script") == []

    # A chip adds its pair to the query.
    browser.get(served.base + "/")
    chip = read(
        browser,
        lambda d: next(
            c.get_attribute("href")
            for c in d.find_elements(By.CSS_SELECTOR, "a.chip")
            if c.text == "customer=c-1"
        ),
    )
    assert chip is not None
    browser.get(chip)  # the chip's link (read, not clicked: a live update may replace it)
    assert _row_ids(browser) == [ids["c-1"]]
    assert parse_qs(urlsplit(browser.current_url).query)["q"] == ["customer = 'c-1'"]

    # A run's page: its timeline shows the retry with its error, the timer, the result.
    link = read(
        browser,
        lambda d: _rows(d)[0].find_element(By.CSS_SELECTOR, "a.run-link").get_attribute("href"),
    )
    assert link is not None
    browser.get(link)
    assert browser.find_element(By.ID, "run-status").text == "completed"
    kinds = [
        e.get_attribute("data-kind") for e in browser.find_elements(By.CSS_SELECTOR, "tr.event")
    ]
    assert kinds[0] == "run_created" and kinds[-1] == "run_completed"
    assert {"step_retrying", "wait_created", "wait_completed", "step_completed"} <= set(kinds)
    retry = browser.find_element(By.CSS_SELECTOR, "tr.event[data-kind='step_retrying']")
    assert "card network timed out" in retry.text
    assert "pay-c-1-100" in browser.find_element(By.ID, "run-result").text

    # The continue-as-new chain, and the claim that moved along it with a new generation.
    browser.get(served.base + f"/runs/{ids['chain']}")
    chain = browser.find_elements(By.CSS_SELECTOR, "#chain li a")
    assert len(chain) == 2
    _follow(browser, chain[-1])
    assert browser.find_element(By.ID, "run-status").text == "completed"
    claim = browser.find_element(By.CSS_SELECTOR, "#claims tr.claim")
    assert "job=count" in claim.text
    assert claim.find_element(By.CSS_SELECTOR, ".generation").text == "3"

    # /runs/by/{key}/{value} finds the holder of a unique pair.
    browser.get(served.base + "/runs/by/order/o-1")
    # a running run's page is live: its header may be re-rendered between find and read
    assert read(browser, lambda d: d.find_element(By.ID, "run-id").text) == ids["o-1"]
    assert read(browser, lambda d: d.find_element(By.ID, "run-status").text) == "running"

    # Cancel, confirmed; the page follows the run to its end without a reload.
    browser.find_element(By.ID, "cancel-reason").send_keys("customer asked")
    _follow(browser, browser.find_element(By.ID, "cancel-button"))
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Cancel run")
    _follow(browser, browser.find_element(By.ID, "confirm-button"))
    _wait_text(browser, "run-status", "cancelled")
    assert served.call(get_run(ids["o-1"], world=world).status()) is RunStatus.CANCELLED
    assert "customer asked" in browser.find_element(By.ID, "timeline").text

    # Resume a hook with a JSON payload, confirmed; the run completes with it.
    browser.get(served.base + f"/runs/{ids['o-2']}")
    payload = browser.find_element(By.CSS_SELECTOR, "textarea.payload")
    payload.clear()
    payload.send_keys('{"approved": true, "by": "ana"}')
    _follow(browser, browser.find_element(By.CSS_SELECTOR, "button.resume-button"))
    assert browser.find_element(By.TAG_NAME, "h1").text.startswith("Resume hook")
    _follow(browser, browser.find_element(By.ID, "confirm-button"))
    _wait_text(browser, "run-status", "completed")
    assert '"by": "ana"' in browser.find_element(By.ID, "run-result").text


def test_the_list_updates_live(served: UiServer, browser: webdriver.Chrome) -> None:
    browser.delete_all_cookies()
    browser.get(served.base + "/")
    assert browser.find_element(By.CSS_SELECTOR, "td.empty").text == "no runs match"
    marker = browser.execute_script("window.wfNoReload = 1; return window.wfNoReload;")
    assert marker == 1
    run = served.call(start(approval, "o-live", world=served.world))
    # a row found may be re-rendered before it is read: then it is looked up again
    wait(browser, ignored=[StaleElementReferenceException]).until(
        lambda d: [r.get_attribute("data-run") for r in _rows(d)] == [run.id]
    )
    assert browser.execute_script("return window.wfNoReload;") == 1  # no reload happened


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_a_browser_logs_in_with_the_token(ui_url: str, browser: webdriver.Chrome) -> None:
    with UiServer(ui_url, token="open-sesame") as server:
        run = server.call(start(approval, "o-login", world=server.world))
        browser.delete_all_cookies()
        browser.get(server.base + f"/runs/{run.id}")
        assert urlsplit(browser.current_url).path == "/login"
        browser.find_element(By.ID, "token").send_keys("wrong")
        _follow(browser, browser.find_element(By.ID, "login-button"))
        assert "not the token" in browser.find_element(By.ID, "login-error").text
        browser.find_element(By.ID, "token").send_keys("open-sesame")
        _follow(browser, browser.find_element(By.ID, "login-button"))
        # back where it started; the live run page may re-render its header between a
        # lookup and the read (seen under load), so the element is looked up again
        wait(browser, ignored=[StaleElementReferenceException]).until(
            lambda _: browser.find_element(By.ID, "run-id").text == run.id
        )
        session = browser.get_cookie("wf_ui_session")
        assert session is not None and session["httpOnly"] and session["sameSite"] == "Strict"
        assert browser.execute_script("return document.cookie") == ""  # scripts cannot read it
        _follow(browser, browser.find_element(By.CSS_SELECTOR, "header form button"))
        browser.get(server.base + "/")
        assert urlsplit(browser.current_url).path == "/login"
