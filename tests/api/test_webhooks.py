"""The webhook ASGI app served by a real HTTP server (uvicorn) in another process."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from workflow import Run, Worker, create_hook, start, workflow

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@workflow
async def waits_for_two(token: str) -> list[Any]:
    hook = create_hook(token)
    return [await hook, await hook]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    url = f"sqlite:///{tmp_path}/world.db"
    port = free_port()
    env = {**os.environ, "WEBHOOK_WORLD": url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "uvicorn", "tests.apps.webhook_app:app",
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, env=env)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the webhook server did not start"
                time.sleep(0.05)
        yield url, port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None,
         method: str = "POST") -> tuple[int, Any]:  # fmt: skip
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


async def waiting_run(world: worlds.World, token: str) -> Run[list[Any]]:
    """A ``waits_for_two`` run, once its hook ``token`` is live."""
    run = await start(waits_for_two, token, world=world)
    with anyio.fail_after(10):
        while not await world.list_hooks(run.id):
            await anyio.sleep(0.02)
    return run


async def test_webhooks_resume_hooks_over_http(server: tuple[str, int]) -> None:
    url, port = server
    world = worlds.open(url)
    async with world, Worker(world, [waits_for_two]):
        run = await waiting_run(world, "order-7-paid")
        first = json.dumps({"paid": 1}).encode()
        status, answer = await anyio.to_thread.run_sync(
            lambda: post(port, "/hooks/order-7-paid", first, {"Idempotency-Key": "evt-1"})
        )
        assert (status, answer) == (202, {"run_id": run.id})
        # the provider retries the same event: delivered once
        status, _ = await anyio.to_thread.run_sync(
            lambda: post(port, "/hooks/order-7-paid", first, {"Idempotency-Key": "evt-1"})
        )
        assert status == 202
        assert (await anyio.to_thread.run_sync(post, port, "/hooks/order-7-paid", b"{"))[0] == 400
        got = await anyio.to_thread.run_sync(
            lambda: post(port, "/hooks/order-7-paid", b"", method="GET")
        )
        assert got[0] == 405
        assert (await anyio.to_thread.run_sync(post, port, "/hooks/unknown", b"1"))[0] == 404
        second = await anyio.to_thread.run_sync(
            post, port, "/hooks/order-7-paid?resume_id=e2", b"2"
        )
        assert second[0] == 202
        assert await run.result(timeout=10) == [{"paid": 1}, 2]
        assert (await anyio.to_thread.run_sync(post, port, "/hooks/order-7-paid", b"3"))[0] == 404


def send_part(port: int, path: str, declared: int, part: bytes, key: str) -> None:
    """Send a request whose body stops after ``part`` of its ``declared`` bytes, then leave."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {declared}\r\nIdempotency-Key: {key}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(head.encode() + part)


async def test_a_body_cut_off_over_http_is_not_delivered(server: tuple[str, int]) -> None:
    """Issue 33, items 7 and 8 behind a real server: the part of a body sent before the
    connection dropped delivers nothing and leaves the Idempotency-Key to the sender's
    full retry; a token is percent-decoded once."""
    url, port = server
    world = worlds.open(url)
    async with world, Worker(world, [waits_for_two]):
        run = await waiting_run(world, "tok-A")
        await anyio.to_thread.run_sync(send_part, port, "/hooks/tok-A", 7, b"1999", "evt-1")
        # the percent sign itself encoded: the token is "tok%2DA", which names no hook
        assert (await anyio.to_thread.run_sync(post, port, "/hooks/tok%252DA", b"0"))[0] == 404
        whole = await anyio.to_thread.run_sync(
            lambda: post(port, "/hooks/tok-A", b"1999000", {"Idempotency-Key": "evt-1"})
        )
        assert whole == (202, {"run_id": run.id})
        second = await anyio.to_thread.run_sync(post, port, "/hooks/tok%2DA", b"2")
        assert second == (202, {"run_id": run.id})
        assert await run.result(timeout=10) == [1999000, 2]


async def test_updates_answer_over_http(server: tuple[str, int]) -> None:
    """``POST /updates/{run}/{name}`` waits for the workflow's reply and returns it."""
    from tests.apps.updateapp import gatekeeper

    url, port = server
    world = worlds.open(url)
    async with world, Worker(world, [gatekeeper]):
        run = await start(gatekeeper, world=world)
        path = f"/updates/{run.id}/enter"
        key = {"Idempotency-Key": "req-1"}
        answer = await anyio.to_thread.run_sync(lambda: post(port, path, b'"ada"', key))
        assert answer == (200, "welcome ada")
        # the client retries: the recorded reply, delivered once
        again = await anyio.to_thread.run_sync(lambda: post(port, path, b'"bob"', key))
        assert again == (200, "welcome ada")
        refused = await anyio.to_thread.run_sync(post, port, path, b'"xena"')
        assert refused == (422, {"error": "xena may not enter"})
        assert (await anyio.to_thread.run_sync(post, port, path, b"{"))[0] == 400
        assert (await anyio.to_thread.run_sync(post, port, path, b'"stop"')) == (200, "stopped")
        assert await run.result(timeout=20) == "stopped"
        closed = await anyio.to_thread.run_sync(post, port, path, b'"eve"')
        assert closed[0] == 409 and "completed" in closed[1]["error"]
        unknown = await anyio.to_thread.run_sync(post, port, "/updates/nope/enter", b"1")
        assert unknown[0] == 404
