"""``workflow.ui.create_app`` over HTTP: the JSON API's shapes, security, read-only mode.

Served by a real uvicorn server (tests/ui_server.py) on every world; the JSON
is compared with what ``wf runs list --json`` and ``wf runs show --json`` print.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import worlds
from cli.main import app as wf
from tests.apps.uiapp import approval, checkout
from tests.conftest import world_url
from tests.ui_server import UiServer
from workflow import Unique, list_hooks, start
from workflow.query import And, AttrRef, Compare, parse
from workflow.query import format as format_query
from workflow.ui import create_app
from workflow.ui._pages import Filter
from worlds.types import WorkerInfo

HOSTILE = "<script>alert(1)</script>"
CSP_PARTS = ("script-src 'self'", "frame-ancestors 'none'", "default-src 'none'")


@pytest.fixture
def ui_url(world_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if world_kind == "postgres":
        return str(request.getfixturevalue("postgres_world_url"))
    return world_url(world_kind, tmp_path)


@pytest.fixture
def served(ui_url: str) -> Iterator[UiServer]:
    with UiServer(ui_url) as server:
        yield server


def _seed(server: UiServer) -> dict[str, str]:
    async def body() -> dict[str, str]:
        done = await start(
            checkout, "c-1", 100, attributes={"customer": HOSTILE, "tier": 2}, world=server.world
        )
        await done.result(timeout=60)
        waiting = await start(
            approval, "o-1", attributes={"ticket": Unique("t/1")}, world=server.world
        )
        while not await list_hooks(run_id=waiting.id, world=server.world):
            await asyncio.sleep(0.02)  # until it waits on its hook, and stays so
        return {"done": done.id, "waiting": waiting.id}

    return server.call(body())


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


def test_the_json_api_matches_the_cli(served: UiServer, world_kind: str) -> None:
    ids = _seed(served)
    listed = served.json("/api/runs")
    assert [run["id"] for run in listed["runs"]] == [ids["waiting"], ids["done"]]
    assert listed["next_cursor"] is None
    assert served.json("/api/runs?" + urlencode({"q": "tier = 2"}))["runs"] == [
        run for run in listed["runs"] if run["id"] == ids["done"]
    ]
    shown = served.json(f"/api/runs/{ids['done']}?events=all")
    assert shown["run"]["attributes"]["customer"] == HOSTILE
    assert shown["run"]["result"]["payment"] == "pay-c-1-100"
    if world_kind == "memory":
        return  # the CLI refuses a memory world: it would vanish when the command exits
    runner = CliRunner()
    cli_list = runner.invoke(wf, ["runs", "list", "--json", "--world", served.url])
    assert cli_list.exit_code == 0, cli_list.output
    assert json.loads(cli_list.stdout) == listed
    cli_show = runner.invoke(
        wf, ["runs", "show", ids["done"], "--json", "--events", "all", "--world", served.url]
    )
    assert cli_show.exit_code == 0, cli_show.output
    assert json.loads(cli_show.stdout) == shown


def test_api_errors_are_json(served: UiServer) -> None:
    status, _, body = served.get("/api/runs?" + urlencode({"q": "tier = "}))
    assert status == 400
    error = json.loads(body)["error"]
    assert error.startswith("malformed query") and error.rstrip().endswith("^")
    status, _, body = served.get("/api/runs?limit=5000")
    assert (status, json.loads(body)) == (400, {"error": "limit must be 1-1000, got '5000'"})
    status, _, body = served.get("/api/runs/no-such-run?events=x")
    assert status == 400 and "events= takes all, or a range of seqs" in json.loads(body)["error"]
    status, _, body = served.get("/api/runs/no-such-run")
    assert (status, json.loads(body)) == (404, {"error": "no run 'no-such-run' in this world"})


def test_pages_escape_user_data_and_carry_security_headers(served: UiServer) -> None:
    ids = _seed(served)
    paths = ("/", f"/runs/{ids['done']}", "/?q=tier+%3D", "/fragments/counts", "/workers", "/nope")
    for path in paths:
        status, headers, body = served.get(path)
        assert status in (200, 400, 404), path
        policy = headers["content-security-policy"]
        assert all(part in policy for part in CSP_PARTS), policy
        assert "unsafe-inline" not in policy
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert HOSTILE not in body
        assert not re.search(r'(src|href|action)="(https?:)?//', body)  # served offline
        assert "<script>" not in body.replace('<script src="/static/ui.js" defer></script>', "")
    _, _, listing = served.get("/")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing


def test_the_workers_page_lists_live_and_stopped_workers(served: UiServer) -> None:
    """``/workers`` shows each registered worker with its status and in-flight count,
    the user-supplied parts escaped."""

    async def body() -> None:
        for worker_id in ("w-busy", "w-gone"):
            info = WorkerInfo(id=worker_id, host=HOSTILE, pid=41, build_id="b-1")
            await served.world.register_worker(info)
        assert await served.world.heartbeat("w-busy", 7)
        await served.world.unregister_worker("w-gone")

    served.call(body())
    status, _, page = served.get("/workers")
    assert status == 200 and HOSTILE not in page
    rows = dict(re.findall(r'data-worker="([^"]+)" data-status="([^"]+)"', page))
    assert (rows["w-busy"], rows["w-gone"]) == ("live", "stopped")
    assert set(rows.values()) == {"live", "stopped"}  # the server's own worker is live
    busy = page[page.index('data-worker="w-busy"') :]
    assert re.search(r'class="in-flight">7<', busy[: busy.index("</tr>")])
    _, _, listing = served.get("/")
    assert 'href="/workers"' in listing


def test_a_unique_pair_redirects_to_its_holder(served: UiServer) -> None:
    ids = _seed(served)
    status, headers, _ = served.get("/runs/by/ticket/" + quote("t/1", safe=""))
    assert (status, headers["location"]) == (303, f"/runs/{ids['waiting']}")
    status, _, body = served.get("/runs/by/ticket/t-2")
    assert status == 404 and "no run holds the unique pair ticket=t-2" in body


def test_actions_need_the_csrf_token_and_a_confirmation(served: UiServer) -> None:
    ids = _seed(served)
    path = f"/runs/{ids['waiting']}/cancel"
    _, _, page = served.get(f"/runs/{ids['waiting']}")
    csrf = _csrf(page)
    form = {"mode": "now", "reason": "test"}
    status, _, _ = served.get(path, data=urlencode(form).encode())
    assert status == 403
    status, _, _ = served.get(
        path,
        data=urlencode({**form, "csrf": csrf, "confirm": "yes"}).encode(),
        headers={"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert status == 403
    status, _, confirm = served.get(path, data=urlencode({**form, "csrf": csrf}).encode())
    assert status == 200 and "yes, cancel the run" in confirm
    assert served.json(f"/api/runs/{ids['waiting']}")["run"]["status"] == "running"
    status, headers, _ = served.get(
        path, data=urlencode({**form, "csrf": csrf, "confirm": "yes"}).encode()
    )
    assert (status, headers["location"]) == (303, f"/runs/{ids['waiting']}")
    assert served.json(f"/api/runs/{ids['waiting']}")["run"]["status"] == "cancelled"


def test_resume_refuses_a_payload_that_is_not_json(served: UiServer) -> None:
    ids = _seed(served)
    _, _, page = served.get(f"/runs/{ids['waiting']}")
    form = {"csrf": _csrf(page), "token": "approve-o-1", "payload": "{nope", "confirm": "yes"}
    status, _, body = served.get("/hooks/resume", data=urlencode(form).encode())
    assert status == 400 and "the payload is not JSON" in body
    form["token"], form["payload"] = "approve-o-404", "1"
    status, _, body = served.get("/hooks/resume", data=urlencode(form).encode())
    assert status == 404 and "no open run waits on hook" in body


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_read_only_hides_and_refuses_actions(ui_url: str) -> None:
    with UiServer(ui_url, read_only=True) as server:
        ids = _seed(server)
        _, _, page = server.get(f"/runs/{ids['waiting']}")
        assert "cancel-form" not in page and "resume-button" not in page
        assert "read-only" in page
        status, _, _ = server.get(
            f"/runs/{ids['waiting']}/cancel",
            data=urlencode({"mode": "now", "confirm": "yes"}).encode(),
        )
        assert status in (404, 405)
        assert server.json(f"/api/runs/{ids['waiting']}")["run"]["status"] == "running"


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_a_token_guards_every_page(ui_url: str) -> None:
    with UiServer(ui_url, token="s3cret-token", worker=False) as server:
        status, _, _ = server.get("/api/runs")
        assert status == 401
        status, headers, _ = server.get("/?q=x")
        assert (status, headers["location"]) == (303, "/login?next=%2F%3Fq%3Dx")
        assert server.get("/api/runs", {"Authorization": "Bearer wrong"})[0] == 401
        assert server.get("/api/runs", {"Authorization": "Bearer s3cret-token"})[0] == 200
        status, _, login = server.get("/login")
        assert status == 200 and "s3cret-token" not in login
        form = {"csrf": _csrf(login), "token": "wrong", "next": "//evil.example/"}
        assert server.get("/login", data=urlencode(form).encode())[0] == 401
        form["token"] = "s3cret-token"
        status, headers, _ = server.get("/login", data=urlencode(form).encode())
        assert (status, headers["location"]) == (303, "/")  # no open redirect
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert "s3cret-token" not in cookie
        session = cookie.split(";", 1)[0]
        assert server.get("/", {"Cookie": session})[0] == 200
        assert server.get("/", {"Cookie": session + "x"})[0] == 303


@pytest.mark.parametrize("world_kind", ["sqlite"])
def test_without_a_token_only_loopback_hosts_are_answered(served: UiServer) -> None:
    assert served.get("/", {"Host": "evil.example"})[0] == 421
    assert served.get("/", {"Host": f"localhost:{served.port}"})[0] == 200


def test_credentials_in_the_world_url_never_appear(postgres_world_url: str) -> None:
    scheme, rest = postgres_world_url.split("://", 1)
    user, host = rest.split("@", 1)  # the test server trusts local users: any password works
    with UiServer(f"{scheme}://{user}:hunter2pw@{host}", worker=False) as server:
        status, _, listing = server.get("/")
        assert status == 200 and f"{user}:***@" in listing
        for path in ("/", "/runs/nope", "/api/runs/nope", "/?q=x+%3D"):
            assert "hunter2pw" not in server.get(path)[2]


def test_create_app_checks_its_arguments() -> None:
    world = worlds.open("memory://")
    with pytest.raises(ValueError, match="token must not be empty"):
        create_app(world, token=" ")
    with pytest.raises(ValueError, match="live_seconds must be >= 0"):
        create_app(world, live_seconds=-1)


def test_a_missing_extra_is_named() -> None:
    code = "import sys; sys.modules['jinja2'] = None; import workflow.ui"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'attribute-workflows[ui]'" in done.stderr


_CHARS = st.characters(exclude_categories=["Cs"])
keys = st.text(_CHARS, min_size=1, max_size=12)
values = st.one_of(
    st.text(_CHARS, max_size=20),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
)


@given(key=keys, value=values, first=st.one_of(st.none(), st.tuples(keys, values)))
def test_a_chip_adds_exactly_its_pair_to_the_query(
    key: str, value: Any, first: tuple[str, Any] | None
) -> None:
    base = (
        Filter()
        if first is None
        else Filter(q=format_query(Compare(AttrRef(first[0]), "=", first[1])))
    )
    url = base.with_term(key, value)
    (query,) = parse_qs(urlsplit(url).query)["q"]
    term = Compare(AttrRef(key), "=", value)
    expected = term if first is None else And((parse(base.q), term))
    assert parse(query) == expected


def test_the_run_page_says_why_a_run_waits(served: UiServer) -> None:
    from workflow import Limited, set_key_limit

    async def body() -> str:
        await set_key_limit("tenant", 1, world=served.world)
        attributes = {"tenant": Limited("acme", 3)}
        await start(approval, "o-1", attributes=attributes, world=served.world)
        attributes = {"tenant": Limited("globex", 3)}
        return (await start(approval, "o-2", attributes=attributes, world=served.world)).id

    waiting = served.call(body())
    status, _, page = served.get(f"/runs/{waiting}")
    assert status == 200
    assert "waiting for a tenant slot: 1 of 1 held, globex has 0" in page


@pytest.mark.parametrize("world_kind", ["memory"])
def test_a_post_refused_early_is_answered_whole(served: UiServer) -> None:
    """A POST answered before anyone read its body (refused as cross-site or for a
    foreign host, or a route that does not exist) still has its body read, so the
    connection ends cleanly and the client gets the answer: a body left unread in
    the socket made the server's close a TCP reset that could destroy the answer on
    its way (seen as ``ConnectionResetError``)."""
    cases = [
        (
            "/schedules/nope/pause",
            {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
        ),
        ("/schedules/nope/pause", {"Host": "evil.example"}),
        ("/no/such/page", {}),
    ]
    for n in range(300):
        path, headers = cases[n % 3]
        status, _, text = served.get(path, headers, b"csrf=x&confirm=yes")
        assert status in (403, 404, 405, 421) and text
