"""``wf`` on a codec world (issue 33.6): ``--codec`` on every command that writes payloads
stores only the codec's output; without it the write is refused, naming the codec."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import msgspec
import pytest

import worlds
from tests.apps.codec_app import SECRET, Reversing, masked, pinned
from tests.cli.test_cli import wf
from workflow import Worker, get_run, list_hooks, list_runs, start
from worlds.codec import MARKER, CodecWorld
from worlds.protocol import World
from worlds.types import HookReceived, RunCreated

pytestmark = pytest.mark.anyio

CODEC = "tests.apps.codec_app:Reversing"
NAMED = "the codec 'tests.apps.codec_app:Reversing'"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_world_url"))
    return f"sqlite:///{tmp_path}/coded.db"


@pytest.fixture
async def coded(url: str) -> AsyncIterator[World]:
    async with CodecWorld(worlds.open(url), Reversing()) as world:
        yield world


def raw(events: Sequence[object]) -> bytes:
    return b"".join(msgspec.msgpack.encode(event) for event in events)


async def test_wf_start_with_codec_stores_only_encoded_arguments(url: str) -> None:
    started = await anyio.to_thread.run_sync(
        lambda: wf(url, "start", "tests.apps.codec_app:masked", f'"{SECRET}"', "--codec", CODEC)
    )
    assert started.code == 0, started.err
    run_id = started.out.strip()
    async with worlds.open(url) as plain:
        created = (await plain.read_events(run_id))[0]
        assert isinstance(created, RunCreated)
        assert created.args[:1] == MARKER  # what the codec wrote, in storage
        assert SECRET.encode() not in raw([created])
    async with CodecWorld(worlds.open(url), Reversing()) as world, Worker(world, [masked]):
        assert await get_run(run_id, world=world).result(timeout=30) == "card ending 4111"


async def test_wf_start_without_codec_on_a_codec_world_is_refused(url: str, coded: World) -> None:
    async with Worker(coded, [masked]):
        assert (
            await (await start(masked, SECRET, world=coded)).result(timeout=30)
            == "card ending 4111"
        )
    refused = await anyio.to_thread.run_sync(
        lambda: wf(url, "start", "tests.apps.codec_app:masked", f'"{SECRET}"')
    )
    assert refused.code == 1
    assert NAMED in refused.err and "--codec" in refused.err
    assert len(refused.err.strip().splitlines()) == 1
    async with worlds.open(url) as plain:
        assert len(await list_runs(world=plain)) == 1  # nothing written


async def test_wf_hooks_resume_with_codec_delivers_an_encoded_payload(
    url: str, coded: World
) -> None:
    async with Worker(coded, [pinned]):
        run = await start(pinned, SECRET, world=coded)
        with anyio.fail_after(30):
            while not await list_hooks(run_id=run.id, world=coded):
                await coded.wait(f"run:{run.id}", 0.05)
        refused = await anyio.to_thread.run_sync(
            lambda: wf(url, "hooks", "resume", "pin-4111", '"pin-secret-9876"')
        )
        assert refused.code == 1
        assert NAMED in refused.err
        assert await list_hooks(run_id=run.id, world=coded)  # nothing delivered
        resumed = await anyio.to_thread.run_sync(
            lambda: wf(url, "hooks", "resume", "pin-4111", '"pin-secret-9876"', "--codec", CODEC)
        )
        assert resumed.code == 0, resumed.err
        assert await run.result(timeout=30) == "card ending 4111, pin pin-secret-9876"
    async with worlds.open(url) as plain:
        events = await plain.read_events(run.id)
    received = [event for event in events if isinstance(event, HookReceived)]
    assert [event.payload[:1] for event in received] == [MARKER]
    assert b"pin-secret-9876" not in raw(events)


async def test_wf_runs_show_without_codec_says_which_codec_is_needed(
    url: str, coded: World
) -> None:
    async with Worker(coded, [masked]):
        run = await start(masked, SECRET, world=coded)
        await run.result(timeout=30)
    bare = await anyio.to_thread.run_sync(lambda: wf(url, "runs", "show", run.id, "--json"))
    assert bare.code == 0, bare.err
    assert "written through a payload codec" in bare.json()["run"]["result"]["encoded"]
    assert NAMED in bare.err
    shown = await anyio.to_thread.run_sync(
        lambda: wf(url, "runs", "show", run.id, "--json", "--codec", CODEC)
    )
    assert shown.json()["run"]["result"] == "card ending 4111"
    assert shown.err == ""
