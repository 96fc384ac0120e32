"""Hooks: payloads from outside the run, exactly once per resume id, unique tokens."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest

from workflow import (
    HookConflictError,
    HookNotFoundError,
    RunStatus,
    Worker,
    continue_as_new,
    create_hook,
    get_run,
    resume_hook,
    start,
    workflow,
)
from workflow.webhooks import HookEndpoints
from worlds.protocol import World
from worlds.types import HookConflict, HookReceived, RunContinued

pytestmark = pytest.mark.anyio


@workflow
async def approval(token: str) -> Any:
    hook = create_hook(token, attributes={"document": "NDA", "$name": "nda-review"})
    return await hook


@workflow
async def collects(token: str, count: int) -> list[Any]:
    hook = create_hook(token)
    received = []
    async for payload in hook:
        received.append(payload)
        if len(received) == count:
            return received
    return received


@workflow
async def hook_or_timeout(token: str, seconds: float) -> str:
    hook = create_hook(token)
    try:
        payload = await asyncio.wait_for(hook.receive(), timeout=seconds)
    except TimeoutError:
        return "timed out"
    return f"got {payload}"


@workflow
async def claims_taken_token(token: str) -> str:
    try:
        await create_hook(token)
    except HookConflictError as exc:
        return f"held by {exc.existing_run.id}"
    return "unreachable"


async def wait_for_hook(world: World, token: str) -> None:
    with anyio.fail_after(5):
        while not any(h.token == token for h in await world.list_hooks()):
            await anyio.sleep(0.01)


async def test_a_hook_is_resumed_with_a_payload(world: World) -> None:
    async with Worker(world, [approval]):
        run = await start(approval, "approve-1", world=world)
        await wait_for_hook(world, "approve-1")
        (live,) = await world.list_hooks(run.id)
        assert live.attributes == {"document": "NDA", "$name": "nda-review"}
        resumed = await resume_hook("approve-1", {"approved": True}, world=world)
        assert resumed == run
        assert await run.result(timeout=10) == {"approved": True}
    # the run closed, so its hook is disposed
    assert await world.list_hooks() == []
    with pytest.raises(HookNotFoundError):
        await resume_hook("approve-1", "late", world=world)


async def test_payloads_arrive_in_order_and_resume_ids_deduplicate(world: World) -> None:
    async with Worker(world, [collects]):
        run = await start(collects, "feed", 3, world=world)
        await wait_for_hook(world, "feed")
        await resume_hook("feed", 1, resume_id="a", world=world)
        await resume_hook("feed", 1, resume_id="a", world=world)  # a retried webhook
        await resume_hook("feed", 2, world=world)
        await resume_hook("feed", 3, resume_id="c", world=world)
        assert await run.result(timeout=10) == [1, 2, 3]
    received = [e for e in await run.events() if isinstance(e, HookReceived)]
    assert [e.resume_id for e in received] == ["a", None, "c"]


async def test_a_hook_races_a_durable_timer(world: World) -> None:
    async with Worker(world, [hook_or_timeout], cache_size=0):
        late = await start(hook_or_timeout, "slow", 0.2, world=world)
        quick = await start(hook_or_timeout, "fast", 5.0, world=world)
        await wait_for_hook(world, "fast")
        await resume_hook("fast", "ping", world=world)
        assert await quick.result(timeout=10) == "got ping"
        assert await late.result(timeout=10) == "timed out"


async def test_tokens_are_unique_across_open_runs(world: World) -> None:
    async with Worker(world, [approval, claims_taken_token]):
        holder = await start(approval, "shared", world=world)
        await wait_for_hook(world, "shared")
        second = await start(claims_taken_token, "shared", world=world)
        assert await second.result(timeout=10) == f"held by {holder.id}"
        assert any(isinstance(e, HookConflict) for e in await second.events())
        await resume_hook("shared", "done", world=world)
        assert await holder.result(timeout=10) == "done"
    assert await holder.status() is RunStatus.COMPLETED


async def test_bad_tokens_and_payloads_are_refused(world: World) -> None:
    with pytest.raises(HookNotFoundError):
        await resume_hook("nobody-holds-this", 1, world=world)
    with pytest.raises(ValueError):
        await resume_hook("has space", 1, world=world)
    with pytest.raises(TypeError):
        await resume_hook("t", object(), world=world)


@workflow
async def inbox(read_before_continuing: int, got: list[Any]) -> list[Any]:
    async for payload in create_hook("inbox-1"):
        got = [*got, payload]
        if len(got) == read_before_continuing:
            continue_as_new(0, got)
        if len(got) == 10:
            return got
    return got


async def post_to_webhook(world: World, token: str, payload: Any, resume_id: str) -> str:
    """POST ``payload`` through ``HookEndpoints`` in-process; the run id it answers 202 with."""
    app = HookEndpoints(world)
    body = json.dumps(payload).encode()
    sent: list[dict[str, Any]] = []
    requests = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return requests.pop(0) if requests else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "method": "POST",
        "path": f"/hooks/{token}",
        "query_string": b"",
        "headers": [(b"idempotency-key", resume_id.encode())],
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 202, sent
    answer: str = json.loads(sent[1]["body"])["run_id"]
    return answer


@pytest.mark.parametrize("cache_size", [10_000, 0])
@pytest.mark.parametrize("sender", ["resume_hook", "webhook"])
@pytest.mark.parametrize("while_running", [False, True])
async def test_payloads_unread_at_continue_as_new_reach_the_next_run(
    world: World, while_running: bool, sender: str, cache_size: int
) -> None:
    """Issue 10, item 2: ten payloads are accepted, the run reads 2 and continues
    as new, and the next run reads the other 8, in order, each once. The payloads
    arrive before the first read, or while the chain runs (racing the
    continuation, so some reach the successor before it created its hook); they
    come through ``resume_hook`` or the webhook endpoint (202 each). With
    ``cache_size=0`` every workflow task replays the run from its log."""

    async def send(n: int) -> str:
        if sender == "webhook":
            return await post_to_webhook(world, "inbox-1", n, f"r-{n}")
        return (await resume_hook("inbox-1", n, resume_id=f"r-{n}", world=world)).id

    run = await start(inbox, 2, [], world=world)
    async with Worker(world, [inbox], cache_size=cache_size):
        await wait_for_hook(world, "inbox-1")
        if while_running:
            for n in range(10):
                await send(n)
            assert await run.result(timeout=20) == list(range(10))
    if not while_running:
        for n in range(10):
            assert await send(n) == run.id
        async with Worker(world, [inbox], cache_size=cache_size):
            assert await run.result(timeout=20) == list(range(10))
        received = [e for e in await run.events() if isinstance(e, HookReceived)]
        assert len(received) == 10
    assert await run.status() is RunStatus.CONTINUED
    (continued,) = [e for e in await run.events() if isinstance(e, RunContinued)]
    successor = get_run(continued.next_run_id, world=world)
    assert await successor.status() is RunStatus.COMPLETED
    before = await successor.events()
    # a retried delivery answers the run its payload moved to and appends nothing
    assert await send(3) == successor.id
    assert await successor.events() == before
