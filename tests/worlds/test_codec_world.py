"""Payload codecs: what reaches the storage is the codec's output, never the plaintext."""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec
import pytest
from cryptography.fernet import Fernet, InvalidToken
from hypothesis import given, settings
from hypothesis import strategies as st

import worlds
from examples.fernet_codec import FernetCodec
from tests.conftest import unsynced
from workflow import (
    RunFailedError,
    Worker,
    create_hook,
    get_run,
    resume_hook,
    set_attribute,
    start,
    step,
    workflow,
)
from workflow._codec import storable_text
from workflow.policies import start_or_resume_hook
from worlds.codec import CODEC_SETTING, MARKER, TEXT_PREFIX, CodecWorld
from worlds.errors import CodecRequiredError
from worlds.memory import MemoryWorld
from worlds.protocol import World
from worlds.query import RunQuery
from worlds.semantics import new_run_id
from worlds.testing import WorldConformance, WorldFactory
from worlds.types import CommitRequest, CreateRunRequest, ErrorInfo, RunCreated, RunFailed

pytestmark = pytest.mark.anyio

SECRETS = [b"4111-1111-1111-1234", b"alice-secret-address", b"hook-secret-pin", b"boom-secret"]


@step
async def look_up_card(customer: str) -> str:
    return "4111-1111-1111-1234"


@step(max_retries=0)
async def explode(why: str) -> None:
    raise RuntimeError(why)


@workflow
async def secretive(address: str) -> str:
    card = await look_up_card(address)
    await set_attribute("customer", "c-9")  # attributes stay in clear: they are indexed
    pin: str = await create_hook("pin-for-c-9")
    return f"{card}/{address}/{pin}"


@workflow
async def fails_secretly(why: str) -> None:
    await explode(why)


def stored_bytes(events: Sequence[object]) -> bytes:
    return b"".join(msgspec.msgpack.encode(e) for e in events)


async def test_the_world_stores_no_plaintext(make_world: Callable[[], World]) -> None:
    inner = make_world()
    world = CodecWorld(inner, FernetCodec(Fernet.generate_key()))
    async with world, Worker(world, [secretive, fails_secretly]):
        run = await start(secretive, "alice-secret-address", world=world)
        while not await world.list_hooks(run.id):
            await world.wait(f"run:{run.id}", 0.05)
        await resume_hook("pin-for-c-9", "hook-secret-pin", world=world)
        assert (
            await run.result(timeout=20)
            == "4111-1111-1111-1234/alice-secret-address/hook-secret-pin"
        )
        failing = await start(fails_secretly, "boom-secret", world=world)
        with pytest.raises(RunFailedError, match="boom-secret"):  # decoded for the caller
            await failing.result(timeout=20)
        raw = stored_bytes(await inner.read_events(run.id))
        raw += stored_bytes(await inner.read_events(failing.id))
        raw += msgspec.msgpack.encode(await inner.get_run(run.id))
        raw += msgspec.msgpack.encode(await inner.get_run(failing.id))
        for secret in SECRETS:
            assert secret not in raw, secret
        assert b"c-9" in raw  # the attribute, in clear by design
        decoded = stored_bytes(await world.read_events(run.id))
        assert b"alice-secret-address" in decoded


async def test_an_sqlite_file_holds_no_plaintext(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/enc.db"
    world = CodecWorld(worlds.open(url), FernetCodec(Fernet.generate_key()))
    async with world, Worker(world, [secretive]):
        run = await start(secretive, "alice-secret-address", world=world)
        while not await world.list_hooks(run.id):
            await world.wait(f"run:{run.id}", 0.05)
        await resume_hook("pin-for-c-9", "hook-secret-pin", world=world)
        await run.result(timeout=20)
    on_disk = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"c-9" in on_disk
    for secret in SECRETS[:3]:
        assert secret not in on_disk, secret


async def test_a_wrong_key_cannot_read_the_payloads() -> None:
    inner = worlds.open("memory://")
    world = CodecWorld(inner, FernetCodec(Fernet.generate_key()))
    async with world, Worker(world, [secretive]):
        run = await start(secretive, "alice-secret-address", world=world)
    other = CodecWorld(inner, FernetCodec(Fernet.generate_key()))
    with pytest.raises(InvalidToken):
        await other.read_events(run.id)


async def test_payloads_written_before_the_codec_stay_readable() -> None:
    inner = worlds.open("memory://")
    run = await start(secretive, "plain-address", world=inner)
    world = CodecWorld(inner, FernetCodec(Fernet.generate_key()))
    async with world, Worker(world, [secretive]):
        while not await world.list_hooks(run.id):
            await world.wait(f"run:{run.id}", 0.05)
        await resume_hook("pin-for-c-9", "1234", world=world)
        result = await get_run(run.id, world=world).result(timeout=20)
        assert result.endswith("/plain-address/1234")


def test_a_codec_needs_encode_and_decode() -> None:
    with pytest.raises(TypeError, match="encode"):
        CodecWorld(worlds.open("memory://"), object())  # type: ignore[arg-type]


class Compress:
    """A codec that compresses: the conformance kit holds a codec world to every rule."""

    def encode(self, data: bytes) -> bytes:
        return zlib.compress(data)

    def decode(self, data: bytes) -> bytes:
        return zlib.decompress(data)


class TestCodecWorldConformance(WorldConformance):
    @pytest.fixture
    def world_factory(self, tmp_path: Path) -> WorldFactory:
        return lambda: CodecWorld(
            worlds.open(unsynced(f"sqlite:///{tmp_path}/codec.db")), Compress()
        )


class Xor:
    """A cheap codec whose output never holds its input (for the property below)."""

    def encode(self, data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in data)

    def decode(self, data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in data)


@settings(max_examples=60, deadline=None)
@given(args=st.binary(), message=st.text(), trace=st.none() | st.text())
async def test_payloads_and_errors_round_trip_and_are_stored_transformed(
    args: bytes, message: str, trace: str | None
) -> None:
    inner = MemoryWorld()
    world = CodecWorld(inner, Xor())
    run_id = new_run_id()
    created = await world.create_run(CreateRunRequest(run_id=run_id, workflow="wf", args=args))
    assert created.run is not None
    (item,) = await world.lease("w", names={"wf"}, limit=1, lease_seconds=30)
    error = ErrorInfo(type="ValueError", message=storable_text(message), traceback=trace)
    done = await world.commit(
        CommitRequest(run_id=run_id, worker_id="w", lease=item, events=(RunFailed(error=error),))
    )
    assert done.ok
    shown = await world.read_events(run_id)
    assert isinstance(shown[0], RunCreated) and shown[0].args == args
    assert isinstance(shown[-1], RunFailed) and shown[-1].error == error
    record = await world.get_run(run_id)
    assert record is not None and record.error == error
    stored = await inner.read_events(run_id)
    assert isinstance(stored[0], RunCreated) and stored[0].args == MARKER + Xor().encode(args)
    assert isinstance(stored[-1], RunFailed)
    assert stored[-1].error.message.startswith(TEXT_PREFIX)


def test_the_fernet_example_runs_as_the_readme_says(tmp_path: Path) -> None:
    """``python examples/fernet_codec.py`` enters its SQLite world a second time
    (through the wrapper, then bare) and prints the result and a ciphertext event."""
    example = Path(__file__).resolve().parents[2] / "examples" / "fernet_codec.py"
    done = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result, event = done.stdout.splitlines()
    assert result == "charged card ending 0017"
    assert event.startswith("RunCreated(") and "alice@example.com" not in event


# ---------------------------------------------------------------- the world's codec (33.6)


class Rot13Bytes:
    """A codec declaring its identity: each byte shifted by 13."""

    codec_id = "shift-13"

    def encode(self, data: bytes) -> bytes:
        return bytes((b + 13) % 256 for b in data)

    def decode(self, data: bytes) -> bytes:
        return bytes((b - 13) % 256 for b in data)


@workflow
async def echo(value: str) -> str:
    return value


async def test_a_codec_world_records_its_codec_on_its_first_write(
    make_world: Callable[[], World],
) -> None:
    inner = make_world()
    async with CodecWorld(inner, Rot13Bytes()) as world:
        assert world.codec_id == "shift-13"
        assert await inner.setting(CODEC_SETTING) is None  # opening writes nothing
        await start(echo, "x", world=world)
        assert await inner.setting(CODEC_SETTING) == "shift-13"
    unnamed = CodecWorld(inner, FernetCodec(Fernet.generate_key()))
    assert unnamed.codec_id == "examples.fernet_codec:FernetCodec"  # no codec_id: the class


async def test_writing_payloads_without_the_codec_is_refused_naming_it(
    make_world: Callable[[], World],
) -> None:
    inner = make_world()
    world = CodecWorld(inner, Rot13Bytes())
    async with world, Worker(world, [secretive]):
        held = await start(secretive, "alice-secret-address", world=world)
        while not await world.list_hooks(held.id):
            await world.wait(f"run:{held.id}", 0.05)
        plain = make_world()
        async with plain:
            before = (await plain.list_runs(RunQuery())).runs
            with pytest.raises(CodecRequiredError, match="'shift-13'") as refused:
                await start(echo, "in clear", world=plain)
            assert refused.value.codec == "shift-13"
            with pytest.raises(CodecRequiredError, match="'shift-13'"):
                await resume_hook("pin-for-c-9", "hook-secret-pin", world=plain)
            with pytest.raises(CodecRequiredError, match="'shift-13'"):
                await start_or_resume_hook(
                    secretive, "other", key="k", value="v", token="t-2", world=plain
                )
            with pytest.raises(CodecRequiredError, match=r"'shift-13'.*not 'examples"):
                await start(echo, "x", world=CodecWorld(inner, FernetCodec(Fernet.generate_key())))
            assert (await plain.list_runs(RunQuery())).runs == before  # nothing written
            assert await plain.list_hooks(held.id)  # the hook got no payload in clear
        await resume_hook("pin-for-c-9", "hook-secret-pin", world=world)
        assert (await held.result(timeout=20)).endswith("/hook-secret-pin")


async def test_reading_codec_payloads_without_the_codec_says_which_codec(
    make_world: Callable[[], World],
) -> None:
    inner = make_world()
    world = CodecWorld(inner, Rot13Bytes())
    async with world, Worker(world, [echo]):
        run = await start(echo, "secret", world=world)
        assert await run.result(timeout=20) == "secret"
    async with make_world() as plain:
        with pytest.raises(CodecRequiredError, match="'shift-13' and cannot be read without it"):
            await get_run(run.id, world=plain).result(timeout=5)


async def test_a_worker_without_the_codec_is_refused_before_it_runs(
    make_world: Callable[[], World],
) -> None:
    inner = make_world()
    async with CodecWorld(inner, Rot13Bytes()) as world:
        await start(echo, "secret", world=world)
    async with make_world() as plain:
        with pytest.raises(CodecRequiredError, match="'shift-13'"):
            async with Worker(plain, [echo]):
                pass  # pragma: no cover - never entered
