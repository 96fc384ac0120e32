"""``workflow.sync.SyncClient``: the client API from plain synchronous code."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from workflow import (
    AttributeConflictError,
    HookNotFoundError,
    RunStatus,
    Unique,
    Worker,
    create_hook,
    step,
    workflow,
)
from workflow.sync import SyncClient
from worlds.sqlite import SqliteWorld


@step
async def double(n: int) -> int:
    return 2 * n


@workflow
async def doubling(n: int) -> int:
    return await double(n)


@workflow
async def waits_for_approval(order: str) -> str:
    answer: str = await create_hook(f"approve-{order}")
    return answer


@pytest.fixture
def worker_url(tmp_path: Path) -> Iterator[str]:
    """An SQLite world served by a Worker in a thread of its own, as a worker process would."""
    url = f"sqlite:///{tmp_path}/sync.db"
    stop = threading.Event()
    ready = threading.Event()

    async def serve() -> None:
        async with SqliteWorld(url) as world, Worker(world, [doubling, waits_for_approval]):
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.02)

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    assert ready.wait(20)
    yield url
    stop.set()
    thread.join(20)


def test_start_result_find_list_and_resume_from_sync_code(worker_url: str) -> None:
    with SyncClient(worker_url) as client:
        run = client.start(doubling, 21, attributes={"order": Unique("o-1"), "customer": "c-9"})
        assert run.result(timeout=20) == 42
        assert run.status() is RunStatus.COMPLETED
        assert run.attributes()["customer"] == "c-9"
        found = client.find_run("order", "o-1")
        assert found == run
        assert client.find_run("order", "nope") is None
        listed = client.list_runs(attributes={"customer": "c-9"})
        assert [r.id for r in listed] == [run.id]
        with pytest.raises(AttributeConflictError):
            client.start(doubling, 1, attributes={"order": Unique("o-1")})

        waiting = client.start(waits_for_approval, "o-2")
        resumed = None
        for _ in range(400):
            try:
                resumed = client.resume_hook("approve-o-2", "yes")
                break
            except HookNotFoundError:
                threading.Event().wait(0.05)  # the hook is created once the worker ran the body
        assert resumed == waiting
        assert waiting.result(timeout=20) == "yes"
        assert client.get_run(waiting.id).status() is RunStatus.COMPLETED


def test_many_threads_share_one_client(worker_url: str) -> None:
    results: list[int] = []
    with SyncClient(worker_url) as client:

        def work(n: int) -> None:
            results.append(client.start(doubling, n).result(timeout=30))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(results) == [2 * n for n in range(8)]


def test_a_closed_client_refuses_calls(worker_url: str) -> None:
    client = SyncClient(worker_url)
    client.close()
    client.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        client.get_run("x").status()


def test_inside_an_event_loop_it_refuses_to_block(worker_url: str) -> None:
    with SyncClient(worker_url) as client:

        async def misuse() -> None:
            client.get_run("x").status()

        with pytest.raises(RuntimeError, match="async client"):
            asyncio.run(misuse())
