"""``wf worker`` as a process: graceful shutdown on SIGTERM, a path instead of a
module, and a world that cannot be used."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import worlds
from tests.apps.codec_app import SECRET, Reversing, masked
from tests.apps.slowapp import slow_flow, slow_thread_flow
from workflow import RunStatus, Worker, get_run, start
from worlds.codec import CodecWorld
from worlds.types import StepCompleted, StepDiscarded, StepStarted

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def spawn(url: str, log: Path, *options: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SLOWAPP_LOG": str(log)}
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.slowapp", "--world", url]
    return subprocess.Popen(
        [*command, *options], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )


async def wait_for_line(log: Path, line: str) -> None:
    with anyio.fail_after(30):
        while not (log.exists() and line in log.read_text().splitlines()):
            await anyio.sleep(0.05)


async def test_sigterm_lets_the_step_in_flight_finish(tmp_path: Path) -> None:
    url, log = f"sqlite:///{tmp_path}/world.db", tmp_path / "log"
    async with worlds.open(url) as world:
        run = await start(slow_flow, world=world)
    proc = spawn(url, log)
    await wait_for_line(log, "start 1")
    proc.send_signal(signal.SIGTERM)
    _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    async with worlds.open(url) as world:
        events = await world.read_events(run.id)
    assert [e.attempt for e in events if isinstance(e, StepCompleted)] == [1]
    assert log.read_text().splitlines() == ["start 1", "end 1"]


async def stopped_past_the_grace(
    tmp_path: Path, flow: Any, signum: signal.Signals, grace: str
) -> tuple[str, str, Path, str]:
    """Start a run of ``flow``, let a ``wf worker`` (120 s leases) begin its step, send
    ``signum`` and wait for it to exit 0: the world's URL, the run id, the step's log
    and what the worker wrote to stderr."""
    url, log = f"sqlite:///{tmp_path}/world.db", tmp_path / "log"
    async with worlds.open(url) as world:
        run = await start(flow, world=world)
    proc = spawn(url, log, "--grace", grace, "--lease-seconds", "120")
    await wait_for_line(log, "start 1")
    proc.send_signal(signum)
    _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    assert proc.returncode == 0, err
    return url, run.id, log, err


async def test_past_the_grace_the_step_is_released_to_another_worker(tmp_path: Path) -> None:
    url, run_id, log, _ = await stopped_past_the_grace(tmp_path, slow_flow, signal.SIGTERM, "0.2")
    os.environ["SLOWAPP_LOG"] = str(log)
    async with worlds.open(url) as world, Worker(world, [slow_flow]):
        again = get_run(run_id, world=world)
        # the 120 s lease was released: another worker takes the step at once
        assert await again.result(timeout=30) == "done"
        events = await again.events()
        assert await again.status() is RunStatus.COMPLETED
    assert [e.attempt for e in events if isinstance(e, StepStarted)] == [1, 2]


async def test_past_the_grace_a_thread_step_is_released_and_the_worker_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain-``def`` step in flight honours ``--grace`` too: on SIGINT the worker
    waits the grace, releases the step's lease and exits while the step's thread is
    still running (issue 33); it used to wait for the 20 s step to end."""
    monkeypatch.setenv("SLOWAPP_SECONDS", "20")
    url, run_id, log, err = await stopped_past_the_grace(
        tmp_path, slow_thread_flow, signal.SIGINT, "1"
    )
    assert "Traceback" not in err
    assert "releases 1 unfinished item(s)" in err
    # the process ended while the step was still sleeping: it never wrote its end
    assert log.read_text().splitlines() == ["start 1"]
    async with worlds.open(url) as world:
        events = await world.read_events(run_id)
    released = [e for e in events if isinstance(e, StepDiscarded)]
    assert [(e.attempt, e.outcome) for e in released] == [(1, "released")]
    monkeypatch.setenv("SLOWAPP_LOG", str(log))
    monkeypatch.setenv("SLOWAPP_SECONDS", "0")
    async with worlds.open(url) as world, Worker(world, [slow_thread_flow]):
        again = get_run(run_id, world=world)
        # the 120 s lease was released: another worker retries the step at once
        assert await again.result(timeout=30) == "done"
        events = await again.events()
    assert [e.attempt for e in events if isinstance(e, StepStarted)] == [1, 2]
    assert log.read_text().splitlines() == ["start 1", "start 2", "end 2"]


async def test_sigterm_during_start_up_exits_0(tmp_path: Path) -> None:
    proc = spawn(f"sqlite:///{tmp_path}/world.db", tmp_path / "log")
    proc.send_signal(signal.SIGTERM)
    _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    assert "Traceback" not in err
    assert proc.returncode in (0, -signal.SIGTERM)


def test_a_path_is_accepted_and_a_missing_file_named(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    missing = subprocess.run(
        [sys.executable, "-m", "cli", "worker", "./orders.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert "orders.py" in missing.stderr and "module name" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


async def test_a_world_it_may_not_write_stops_the_worker_with_one_line(
    postgres_world_url: str, tmp_path: Path
) -> None:
    """A role that may read but not write the world's tables: waiting cannot help,
    so ``wf worker`` exits 1 with one line, instead of retrying forever."""
    import asyncpg

    from worlds.postgres import PostgresWorld

    async with worlds.open(postgres_world_url) as world:
        await start(slow_flow, world=world)
    schema = PostgresWorld(postgres_world_url).schema
    role = f"ro_{schema}"
    conn = await asyncpg.connect(PostgresWorld(postgres_world_url).dsn)
    try:
        await conn.execute(f'CREATE ROLE "{role}" LOGIN')
        await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        await conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
        url = postgres_world_url.replace("postgres@", f"{role}@", 1)
        proc = spawn(url, tmp_path / "log")
        _, err = await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    finally:
        await conn.execute(f'DROP OWNED BY "{role}"')
        await conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        await conn.close()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "cannot be used" in err
    assert "permission denied" in err
    assert len(err.strip().splitlines()) <= 3, err  # serving, the worker's reason, the exit
    assert not (tmp_path / "log").exists()


async def test_a_worker_with_a_codec_serves_a_world_that_holds_only_its_output(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/coded.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "cli", "worker", "tests.apps.codec_app", "--world", url]
    proc = subprocess.Popen(
        [*command, "--codec", "tests.apps.codec_app:Reversing"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        async with CodecWorld(worlds.open(url), Reversing()) as world:
            run = await start(masked, SECRET, world=world)
            assert await run.result(timeout=60) == "card ending 4111"
            raw = await world.inner.read_events(run.id)
    finally:
        proc.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=60))
    assert SECRET.encode() not in b"".join(msgspec.msgpack.encode(e) for e in raw)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nocolon", "MODULE:NAME"),
        ("tests.apps.codec_app:nothing", "has no"),
        ("tests.apps.codec_app:SECRET", "not a payload codec"),
    ],
)
def test_a_bad_codec_is_one_line(spec: str, says: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "cli", "worker", "tests.apps.codec_app", "--codec", spec],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
