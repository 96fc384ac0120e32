"""The web UI mounted under a prefix (``Mount("/wf", create_app(world))``): every URL
it emits (links, assets, form actions, fragments, redirects, the login cookie)
stays under the prefix, through Starlette's TestClient."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import worlds
from tests.apps.uiapp import approval, checkout
from workflow import Unique, start
from workflow.ui import create_app
from worlds.protocol import World

PREFIX = "/wf"
URL = re.compile(r'(?:href|src|action|data-src)="([^"]*)"')


def seeded() -> tuple[World, dict[str, str]]:
    """A memory world with a run holding a unique pair and a run waiting on a hook."""
    world = worlds.open("memory://")

    async def seed() -> dict[str, str]:
        paid = await start(checkout, "c-1", 100, attributes={"order": Unique("o-1")}, world=world)
        waiting = await start(approval, "o-2", world=world)
        return {"paid": paid.id, "waiting": waiting.id}

    return world, anyio.run(seed)


def mounted(world: World, **options: Any) -> TestClient:
    app = Starlette(routes=[Mount(PREFIX, create_app(world, **options))])
    return TestClient(app, base_url="http://localhost", follow_redirects=False)


@pytest.fixture
def client() -> Iterator[tuple[TestClient, dict[str, str]]]:
    world, runs = seeded()
    with mounted(world) as client:
        yield client, runs


def urls(html: str) -> list[str]:
    return [url.replace("&amp;", "&") for url in URL.findall(html)]


def test_every_url_of_every_page_stays_under_the_prefix_and_answers(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, runs = client
    pages = [f"{PREFIX}/", f"{PREFIX}/runs/{runs['paid']}", f"{PREFIX}/runs/{runs['waiting']}"]
    pages.append(f"{PREFIX}/?q=order+%3D+%27o-1%27")
    seen: set[str] = set()
    for page in pages:
        response = http.get(page)
        assert response.status_code == 200, (page, response.text)
        found = urls(response.text)
        assert f"{PREFIX}/static/ui.css" in found and f"{PREFIX}/static/ui.js" in found
        for url in found:
            if url.startswith("?"):  # relative to the page itself
                continue
            assert url.startswith(f"{PREFIX}/"), (page, url)
            seen.add(url)
    assert any(url.startswith(f"{PREFIX}/fragments/counts") for url in seen)
    assert f"{PREFIX}/api/runs/{runs['paid']}" in seen
    for url in sorted(seen):
        if url.endswith(("/cancel", "/hooks/resume", "/logout")):  # forms that POST
            continue
        response = http.get(url)
        assert response.status_code in (200, 303), (url, response.status_code)
        if response.status_code == 303:  # a unique pair's link: to its holder
            assert response.headers["location"] == f"{PREFIX}/runs/{runs['paid']}", url
    fragment = http.get(f"{PREFIX}/fragments/counts")
    assert all(url.startswith(f"{PREFIX}/") for url in urls(fragment.text)), fragment.text


def test_redirects_and_api_errors_stay_under_the_prefix(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, runs = client
    page = http.get(f"{PREFIX}/runs/{runs['paid']}").text
    (csrf,) = re.findall(r'name="csrf" value="([^"]+)"', page)[:1]
    done = http.post(
        f"{PREFIX}/runs/{runs['paid']}/cancel",
        data={"csrf": csrf, "confirm": "yes", "mode": "now"},
    )
    assert done.status_code == 303 and done.headers["location"] == f"{PREFIX}/runs/{runs['paid']}"
    held = http.get(f"{PREFIX}/runs/by/order/o-1")
    assert held.headers["location"] == f"{PREFIX}/runs/{runs['paid']}"
    missing = http.get(f"{PREFIX}/api/runs/no-such-run")
    assert missing.status_code == 404 and "error" in missing.json()
    assert http.get(f"{PREFIX}/api/runs").json()["runs"]


def test_a_token_login_works_under_the_prefix() -> None:
    world, runs = seeded()
    with mounted(world, token="s3cret") as http:
        asked = http.get(f"{PREFIX}/runs/{runs['paid']}")
        assert asked.status_code == 303
        location = asked.headers["location"]
        assert location.startswith(f"{PREFIX}/login?next="), location
        assert http.get(f"{PREFIX}/static/ui.css").status_code == 200  # open before login
        form = http.get(location)
        assert form.status_code == 200
        assert f'action="{PREFIX}/login"' in form.text
        (csrf,) = re.findall(r'name="csrf" value="([^"]+)"', form.text)[:1]
        (target,) = re.findall(r'name="next" value="([^"]+)"', form.text)
        logged = http.post(
            f"{PREFIX}/login", data={"csrf": csrf, "token": "s3cret", "next": target}
        )
        assert logged.status_code == 303
        assert logged.headers["location"] == f"{PREFIX}/runs/{runs['paid']}"
        assert f"Path={PREFIX}" in logged.headers["set-cookie"]
        assert http.get(logged.headers["location"]).status_code == 200
        assert http.get(f"{PREFIX}/api/runs").status_code == 200
        out = http.post(f"{PREFIX}/logout", data={"csrf": csrf})
        assert out.headers["location"] == f"{PREFIX}/login"
