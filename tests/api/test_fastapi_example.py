"""examples/fastapi_app.py: a retried request with the same Idempotency-Key gets the same run."""

from __future__ import annotations

import anyio
import httpx
import pytest

from examples.checkout import checkout
from examples.fastapi_app import create_app
from workflow import Worker, get_run
from worlds.protocol import World

pytestmark = pytest.mark.anyio


async def test_a_retried_request_returns_the_same_run(world: World) -> None:
    app = create_app(world)
    transport = httpx.ASGITransport(app=app)
    async with (
        Worker(world, [checkout]),
        httpx.AsyncClient(transport=transport, base_url="http://orders") as client,
    ):
        first = await client.post(
            "/orders/o-1", json={"cents": 1999}, headers={"Idempotency-Key": "k-1"}
        )
        retried = await client.post(
            "/orders/o-1", json={"cents": 1999}, headers={"Idempotency-Key": "k-1"}
        )
        assert first.status_code == retried.status_code == 202
        assert first.json()["run_id"] == retried.json()["run_id"]

        other = await client.post(
            "/orders/o-1", json={"cents": 1999}, headers={"Idempotency-Key": "k-2"}
        )
        assert other.json()["run_id"] != first.json()["run_id"]

        ids: list[str] = []

        async def retry_at_once() -> None:
            response = await client.post(
                "/orders/o-9", json={"cents": 5}, headers={"Idempotency-Key": "k-9"}
            )
            ids.append(response.json()["run_id"])

        async with anyio.create_task_group() as group:  # eight retries racing each other
            for _ in range(8):
                group.start_soon(retry_at_once)
        assert len(ids) == 8
        assert len(set(ids)) == 1

        shown = await client.get(f"/runs/{first.json()['run_id']}")
        assert shown.status_code == 200
        assert (await client.get("/runs/nope")).status_code == 404
        assert (await client.post("/orders/o-2", json={"cents": 1})).status_code == 422
        too_long = await client.post(
            "/orders/o-2", json={"cents": 1}, headers={"Idempotency-Key": "k" * 192}
        )
        assert too_long.status_code == 422
    assert (await get_run(first.json()["run_id"], world=world).attributes())[
        "$idempotency_key"
    ] == "k-1"
