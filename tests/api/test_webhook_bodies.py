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
    app: HookEndpoints,
    path: str,
    body: bytes,
    *,
    query: bytes = b"",
    method: str = "POST",
    key: str | None = None,
) -> tuple[int, Any]:
    """One request through the ASGI app (``key``: its ``Idempotency-Key``); returns the
    status and the JSON answer."""
    headers = [] if key is None else [(b"idempotency-key", key.encode())]
    scope = {"type": "http", "method": method, "path": path, "query_string": query,
             "headers": headers}  # fmt: skip
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


async def deliver(
    app: HookEndpoints,
    path: str,
    chunks: list[bytes],
    *,
    headers: list[tuple[bytes, bytes]] | None = None,
    disconnect: bool = False,
) -> list[dict[str, Any]]:
    """Send the body in ``chunks`` (more to come after each but the last, unless
    ``disconnect``: then the sender leaves after the last); what the app sent back."""
    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"",
             "headers": headers or []}  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": disconnect or i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    if disconnect:
        messages.append({"type": "http.disconnect"})
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await anyio.sleep_forever()  # a server never answers again after a disconnect
        raise AssertionError

    async def send(message: Any) -> None:
        sent.append(dict(message))

    with anyio.fail_after(10):
        await app(scope, receive, send)
    return sent


def answer(sent: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    return int(sent[0]["status"]), json.loads(sent[1]["body"])


async def live_inbox(world: World, token: str) -> Any:
    run = await start(inbox, token, world=world)
    with anyio.fail_after(10):
        while not await world.list_hooks(run.id):
            await anyio.sleep(0.02)
    return run


async def test_a_body_cut_by_a_disconnect_is_not_delivered_and_keeps_its_key(
    world: World,
) -> None:
    """Issue 33, item 7: the part of a body that arrived before the sender left is not
    the body; the sender's retry of the whole body, same Idempotency-Key, is delivered."""
    app = HookEndpoints(world)
    key = [(b"idempotency-key", b"evt-1"), (b"content-length", b"7")]
    async with Worker(world, [inbox]):
        run = await live_inbox(world, "order-2")
        sent = await deliver(app, "/hooks/order-2", [b"19", b"99"], headers=key, disconnect=True)
        assert sent == []  # nobody is left to answer
        # without a Content-Length too
        await deliver(app, "/hooks/order-2", [b"1999"], disconnect=True)
        assert not [e for e in await run.events() if isinstance(e, HookReceived)]
        assert await world.list_hooks(run.id)
        retry = await deliver(app, "/hooks/order-2", [b"1999", b"000"], headers=key)
        assert answer(retry) == (202, {"run_id": run.id})
        assert await run.result(timeout=10) == 1999000


async def test_a_body_that_does_not_match_its_content_length_gets_400(world: World) -> None:
    """Issue 33, item 7: a body shorter (or longer) than its Content-Length is refused,
    nothing delivered and its Idempotency-Key unused."""
    app = HookEndpoints(world)
    async with Worker(world, [inbox]):
        run = await live_inbox(world, "order-3")
        for length, chunks, reason in [
            (b"7", [b"1999"], "ended after 4 of its Content-Length of 7"),
            (b"7", [b"19", b"99"], "ended after 4 of its Content-Length of 7"),
            (b"2", [b"1999"], "longer than its Content-Length of 2"),
            (b"seven", [b"1999"], "Content-Length must be a number"),
            (b"\xb2", [b"1"], "Content-Length must be a number"),
        ]:
            headers = [(b"idempotency-key", b"evt-3"), (b"content-length", length)]
            status, refused = answer(await deliver(app, "/hooks/order-3", chunks, headers=headers))
            assert (status, reason in refused["error"]) == (400, True), refused
        too_large = [(b"content-length", str(2 << 20).encode())]
        assert answer(await deliver(app, "/hooks/order-3", [b"1"], headers=too_large))[0] == 413
        assert not [e for e in await run.events() if isinstance(e, HookReceived)]
        headers = [(b"idempotency-key", b"evt-3"), (b"content-length", b"7")]
        whole = await deliver(app, "/hooks/order-3", [b"1999", b"000"], headers=headers)
        assert answer(whole) == (202, {"run_id": run.id})
        assert await run.result(timeout=10) == 1999000


async def test_the_token_is_percent_decoded_once(world: World) -> None:
    """Issue 33, item 8: ASGI's ``path`` is decoded already; ``/hooks/tok%252DA`` on the
    wire is ``tok%2DA`` here, which names no hook, and never ``tok-A``."""
    app = HookEndpoints(world)
    async with Worker(world, [inbox]):
        run = await live_inbox(world, "tok-A")
        status, _ = await call(app, "/hooks/tok%2DA", b"1")
        assert status == 404
        assert not [e for e in await run.events() if isinstance(e, HookReceived)]
        assert await call(app, "/hooks/tok-A", b"2") == (202, {"run_id": run.id})
        assert await run.result(timeout=10) == 2
