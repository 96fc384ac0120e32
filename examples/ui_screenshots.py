"""Refresh the web UI's screenshots in docs/ (shown in the README).

Seeds a memory world with the test app's runs (tests/apps/uiapp.py), serves
``workflow.ui`` over it, and has headless Chromium (Debian's ``chromium``) save
``docs/ui-runs.png`` (the list with its charts), ``docs/ui-run.png`` (a run's
page), ``docs/ui-waterfall.png`` (a run's waterfall: a retry, a timer, a hold, a
child run and a hook still awaited), ``docs/ui-schedules.png`` and
``docs/ui-flow.png`` (holders and waiters per value of a limited key).

Usage, from the repository root::

    python -m examples.ui_screenshots
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.apps.uiapp import approval, checkout, countdown, pipeline, refund
from tests.browser import start_browser
from tests.ui_server import UiServer
from workflow import Limited, Run, Unique, list_hooks, resume_hook, start
from workflow.schedules import create_schedule

DOCS = Path(__file__).resolve().parent.parent / "docs"
CUSTOMERS = [("c-9", "eu", 2), ("c-17", "us", 1), ("c-42", "eu", 3), ("c-7", "apac", 1)]


async def seed(server: UiServer) -> dict[str, str]:
    world = server.world
    done: list[Run[Any]] = []
    for n, (customer, region, tier) in enumerate(CUSTOMERS * 2):
        attributes = {
            "customer": customer,
            "region": region,
            "tier": tier,
            "order": Unique(f"o-{1000 + n}"),
        }
        done.append(
            await start(checkout, customer, 1250 * tier, attributes=attributes, world=world)
        )
    done.append(await start(countdown, 2, attributes={"job": Unique("nightly")}, world=world))
    failed = await start(refund, "c-42", attributes={"customer": "c-42"}, world=world)
    for run in done:
        await run.result(timeout=60)
    while (await failed.status()).value != "failed":
        await asyncio.sleep(0.05)
    waiting = await start(approval, "o-2001", attributes={"customer": "c-9"}, world=world)
    while not await waiting.claims():
        await asyncio.sleep(0.05)
    piped = await start(pipeline, "o-3001", attributes={"customer": "c-17"}, world=world)
    while not await list_hooks(run_id=piped.id, world=world):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # the hook's wait shows as a bar of its own
    await resume_hook("pipeline-o-3001", {"approved": True}, world=world)
    await piped.result(timeout=60)
    for n in range(5):
        tenant = Limited("acme" if n < 4 else "globex", 3)
        await start(approval, f"o-40{n}", attributes={"tenant": tenant}, world=world)
    await create_schedule(checkout, "c-9", 900, id="nightly-invoice", cron="0 3 * * *", world=world)
    hourly = await create_schedule(
        refund, "c-7", id="hourly-sweep", every=timedelta(hours=1), world=world
    )
    await hourly.trigger()
    await hourly.pause("until the provider is back")
    return {"checkout": done[0].id, "waiting": waiting.id, "pipeline": piped.id}


def shoot(driver: object, path: Path) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")  # type: ignore[attr-defined]
    driver.set_window_size(1280, max(600, int(height) + 120))  # type: ignore[attr-defined]
    driver.save_screenshot(str(path))  # type: ignore[attr-defined]
    print(f"wrote {path}")


def main() -> None:
    with UiServer("memory://", live_seconds=0) as server:
        ids = server.call(seed(server))
        driver = start_browser()
        try:
            driver.get(server.base + "/")
            WebDriverWait(driver, 30).until(
                lambda d: (
                    d.find_elements(By.CSS_SELECTOR, "#counts .count")
                    and d.find_elements(By.CSS_SELECTOR, "#chart-created rect")
                )
            )
            shoot(driver, DOCS / "ui-runs.png")
            driver.get(server.base + f"/runs/{ids['checkout']}")
            shoot(driver, DOCS / "ui-run.png")
            driver.get(server.base + f"/runs/{ids['pipeline']}")
            driver.set_window_size(1280, 900)
            driver.find_element(By.ID, "waterfall").screenshot(str(DOCS / "ui-waterfall.png"))
            print(f"wrote {DOCS / 'ui-waterfall.png'}")
            driver.get(server.base + "/schedules")
            shoot(driver, DOCS / "ui-schedules.png")
            driver.get(server.base + "/flow?key=tenant")
            shoot(driver, DOCS / "ui-flow.png")
        finally:
            driver.quit()


if __name__ == "__main__":
    main()
