"""What ``HookEndpoints`` answers for each body, on every world (issue 10, item 7).

404 only for unknown hooks, 400 with a reason for a body that cannot be
accepted, and never an exception out of the ASGI app. The app is called
directly here; tests/api/test_webhooks.py serves it over real HTTP.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from tests.conftest import world_url
from workflow import Worker, create_hook, start, workflow
from workflow.webhooks import HookEndpoints
from worlds.protocol import World
from worlds.types import HookReceived

pytestmark = pytest.mark.anyio


@workflow
async def inbox(token: str) -> Any:
    return await create_hook(token)


async def call(
    app: HookEndpoints, path: str, body: bytes, *, query: bytes = b"", method: str = "POST"
) -> tuple[int, dict[str, Any]]:
    """One request through the ASGI app; returns the status and the JSON answer."""
    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": []}
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return requests.pop(0) if requests else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return int(sent[0]["status"]), json.loads(sent[1]["body"])


NOT_ACCEPTED: list[tuple[bytes, str]] = [
    (b"", "empty"),
    (b"   ", "empty"),
    (b"NaN", "NaN is not a JSON value"),
    (b'{"x": Infinity}', "Infinity is not a JSON value"),
    (b"[-Infinity]", "-Infinity is not a JSON value"),
    (b"{not json", "must be JSON"),
    (b"\xff\xfe", "UTF-8"),
    (b'{"id": 123456789012345678901234}', "cannot be recorded"),
    (b'"\\ud800"', "lone surrogate"),
    (b'{"k": ["ok", "\\udfff"]}', "lone surrogate"),
    (b"[" * 100_000 + b"]" * 100_000, "too deeply"),
]


async def test_bodies_that_cannot_be_accepted_get_400_and_leave_the_hook_live(
    world: World,
) -> None:
    app = HookEndpoints(world)
    async with Worker(world, [inbox]):
        run = await start(inbox, "order-1", world=world)
        with anyio.fail_after(10):
            while not await world.list_hooks(run.id):
                await anyio.sleep(0.02)
        for body, reason in NOT_ACCEPTED:
            status, answer = await call(app, "/hooks/order-1", body)
            assert (status, reason in answer["error"]) == (400, True), (body[:40], answer)
        status, answer = await call(app, "/hooks/order-1", b"{}", query=b"resume_id=a%00b")
        assert (status, "resume id" in answer["error"]) == (400, True), answer
        assert not [e for e in await run.events() if isinstance(e, HookReceived)]
        # the hook is still live: a good body is delivered
        status, answer = await call(app, "/hooks/order-1", b'{"id": 9223372036854775807}')
        assert (status, answer) == (202, {"run_id": run.id})
        assert await run.result(timeout=10) == {"id": 2**63 - 1}


async def test_404_is_for_unknown_hooks_only(world: World) -> None:
    app = HookEndpoints(world)
    for path in ["/hooks/nobody", "/hooks/bad%20token", "/hooks/%00", "/elsewhere"]:
        status, _ = await call(app, path, b"{}")
        assert status == 404, path
    assert (await call(app, "/hooks/nobody", b"{}", method="GET"))[0] == 405
    assert (await call(HookEndpoints(world, max_body=4), "/hooks/x", b"[1, 2]"))[0] == 413


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])  # a memory world has nothing to lose
async def test_a_closed_world_gets_503_not_an_exception(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "postgres":
        world = worlds.open(str(request.getfixturevalue("postgres_world_url")))
    else:
        world = worlds.open(world_url(kind, tmp_path))
    async with world:
        await world.list_hooks()
    status, answer = await call(HookEndpoints(world), "/hooks/order-1", b"{}")
    assert status == 503, answer
