"""Updates from several OS processes at once, and a reply that outlives its worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from tests.apps.updateapp import answer_then_die, counter, die_once
from workflow import Worker, find_run, list_runs, start
from worlds.types import UpdateReceived, UpdateReplied

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 4
EACH = 5
IDS = 10
"""Update ids: 20 callers in 4 processes, each id sent by two callers of two processes."""


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_world_url"))
    return f"sqlite:///{tmp_path}/world.db"


_fast = ("--lease-seconds", "1")  # the killed worker's lease lapses soon


def _span(process: int) -> list[str]:
    """The arguments FIRST COUNT IDS of client ``process``."""
    return [str(process * EACH), str(EACH), str(IDS)]


async def _clients(mode: str, url: str, target: str) -> list[dict[str, Any]]:
    """Run the client processes (off the event loop, where the test's Worker runs)."""
    return await anyio.to_thread.run_sync(_run_clients, mode, url, target)


def _run_clients(mode: str, url: str, target: str) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.apps.updateapp", mode, url, target, *_span(p)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    lines = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        lines += [json.loads(line) for line in out.splitlines()]
    assert len(lines) == PROCESSES * EACH
    return lines


def _one_reply_per_id(lines: list[dict[str, Any]]) -> dict[str, Any]:
    by_id: dict[str, list[Any]] = defaultdict(list)
    for line in lines:
        by_id[line["id"]].append(line["reply"])
    assert all(len(set(map(json.dumps, replies))) == 1 for replies in by_id.values()), by_id
    replies = {update_id: found[0] for update_id, found in by_id.items()}
    # every id got its own position: each was delivered to the body once
    assert sorted(reply["position"] for reply in replies.values()) == list(range(1, IDS + 1))
    return replies


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_updates_from_several_processes_reply_once_per_id(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    async with worlds.open(url) as world:
        await world.migrate()
        async with Worker(world, [counter]):
            run = await start(counter, IDS, world=world)
            lines = await _clients("send", url, run.id)
            assert sorted(await run.result(timeout=120)) == sorted(f"u-{n}" for n in range(IDS))
        replies = _one_reply_per_id(lines)
        assert all(reply["item"] == f"item-{i}" for i, reply in replies.items())
        events = await run.events()
        assert sorted(e.update_id for e in events if isinstance(e, UpdateReceived)) == sorted(
            replies
        )
        assert len([e for e in events if isinstance(e, UpdateReplied)]) == IDS
        # after the run closed, a caller with a known id gets the recorded reply
        assert await run.update("add", "again", update_id="u-3") == replies["u-3"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_update_with_start_from_several_processes_starts_one_run(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    async with worlds.open(url) as world:
        await world.migrate()
        async with Worker(world, [counter]):
            lines = await _clients("start", url, "cart-1")
            holder = await find_run("cart", "cart-1", world=world)
            assert holder is not None
            await holder.result(timeout=120)
        assert {line["run"] for line in lines} == {holder.id}
        assert [r.id for r in await list_runs(workflow=counter, world=world)] == [holder.id]
        _one_reply_per_id(lines)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_reply_survives_a_sigkill_of_its_worker(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    marker = tmp_path / "killed"
    async with worlds.open(url) as world:
        await world.migrate()
        run = await start(answer_then_die, str(marker), world=world)
        # no worker yet: the update is delivered and waits for its answer
        with pytest.raises(TimeoutError):
            await run.update("ask", "q-1", update_id="k-1", timeout=0.5)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        worker = subprocess.Popen(
            [sys.executable, "-m", "cli", "worker", "tests.apps.updateapp", "--world", url, *_fast],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # the body replies, then its step SIGKILLs the worker before any caller read
        code = await anyio.to_thread.run_sync(lambda: worker.wait(timeout=120))
        assert code == -signal.SIGKILL, worker.stderr.read() if worker.stderr else ""
        assert marker.exists()
        # no worker runs now: the reply is read from the log
        assert await run.update("ask", "q-1", update_id="k-1") == "answer to q-1"
        async with Worker(world, [answer_then_die, die_once], lease_seconds=1.0):
            assert await run.update("ask", "q-2", update_id="k-2") == "bye"
            assert await run.result(timeout=60) == "done"
        replied = [e for e in await run.events() if isinstance(e, UpdateReplied)]
        assert [e.update_id for e in replied] == ["k-1", "k-2"]
        assert await run.update("ask", "q-1", update_id="k-1") == "answer to q-1"
