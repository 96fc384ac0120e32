"""Headless Chromium for the web UI's tests: Debian's ``chromium`` driven by Selenium.

The browser and its driver come from the system (``.ci/run`` installs the Debian
packages); both paths are given explicitly, so Selenium never downloads anything.
Without them the browser tests are skipped, except when ``$CI`` is set: then they fail.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

BROWSERS = ("chromium", "chromium-browser", "google-chrome")

WAIT = 60.0
"""Seconds a browser check waits for the page to show something (hang detection)."""

POLL = 0.05
"""Seconds between a wait's checks. Selenium's default, 0.5 s, added about that much to
every click that loads a page, since the first check comes before the page has gone."""


def wait(
    driver: webdriver.Chrome, *, ignored: Iterable[type[Exception]] = ()
) -> WebDriverWait[webdriver.Chrome]:
    """A ``WebDriverWait`` of ``WAIT`` seconds that checks every ``POLL`` seconds."""
    return WebDriverWait(driver, WAIT, poll_frequency=POLL, ignored_exceptions=list(ignored))


T = TypeVar("T")


def read(driver: webdriver.Chrome, question: Callable[[webdriver.Chrome], T]) -> T:
    """Answer ``question`` about the page, asked again when a live update re-rendered
    an element between finding it and reading it (seen under load: the list's rows are
    replaced by the live fragment while a test reads their attributes)."""
    answers: list[T] = []

    def asked(d: webdriver.Chrome) -> bool:
        answers.append(question(d))
        return True

    wait(driver, ignored=[StaleElementReferenceException]).until(asked)
    return answers[-1]


def _find(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def start_browser(width: int = 1280, height: int = 900) -> webdriver.Chrome:
    """A headless Chromium, or a skip (a failure under ``$CI``) if none is installed."""
    binary = _find(BROWSERS)
    driver = _find(("chromedriver",))
    if binary is None or driver is None:
        message = "no chromium and chromedriver (apt-get install chromium chromium-driver)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}")
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for csp_violations
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


def csp_violations(driver: webdriver.Chrome) -> list[str]:
    """The Content-Security-Policy violations Chromium reported to the console since the
    last call (reading the browser log empties it)."""
    messages = [str(entry.get("message", "")) for entry in driver.get_log("browser")]
    return [m for m in messages if "Content Security Policy" in m or "Refused to" in m]


@pytest.fixture(scope="session")
def browser() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for the session, so one per xdist worker process (each test
    starts by loading a page)."""
    driver = start_browser()
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def follow(driver: webdriver.Chrome, element: WebElement) -> None:
    """Click ``element`` and wait until the page it loads has replaced this one."""
    page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    wait(driver).until(lambda _: is_gone(page))


def is_gone(page: WebElement) -> bool:
    """Whether ``page`` left the document. Chromium says so either as a stale element or,
    when the old document is torn down mid-question, as an inspector error naming it."""
    try:
        page.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False
