"""Hooks across OS processes: a ``wf worker`` process runs the workflow, and
``wf hooks`` in other processes lists and resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import worlds
from tests.apps.hookapp import needs_approval
from tests.cli.test_cli import wf_in
from workflow import start
from worlds.types import HookReceived

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def wf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def test_resume_a_hook_from_another_process(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    worker = subprocess.Popen(
        [sys.executable, "-m", "cli", "worker", "tests.apps.hookapp", "--world", url],
        cwd=ROOT, env=ENV, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        async with worlds.open(url) as world:
            run = await start(needs_approval, "approve-42", world=world)
            with anyio.fail_after(20):
                while not (await wf_in(url, "hooks", "list", "--json")).json():
                    await anyio.sleep(0.1)
            listed = await anyio.to_thread.run_sync(wf, "hooks", "list", "--world", url,
                                                    "--json")  # fmt: skip
            hooks = json.loads(listed.stdout)
            assert hooks[0]["token"] == "approve-42"
            assert hooks[0]["run_id"] == run.id
            assert hooks[0]["attributes"] == {"kind": "approval"}
            resume = ("hooks", "resume", "approve-42", '{"ok": true}', "--resume-id", "r1")
            resumed = await anyio.to_thread.run_sync(wf, *resume, "--world", url)
            assert resumed.returncode == 0, resumed.stderr
            assert run.id in resumed.stdout
            # the same resume id twice: delivered once
            twice = await wf_in(url, *resume)
            assert twice.code == 0, twice.err
            assert run.id in twice.out
            assert await run.result(timeout=20) == {"ok": True}
            received = [e for e in await run.events() if isinstance(e, HookReceived)]
            assert len(received) == 1
        unknown = await wf_in(url, "hooks", "resume", "approve-42", "1")
        assert unknown.code == 1 and "no live hook" in unknown.err
        bad = await wf_in(url, "hooks", "resume", "x", "{nope")
        assert bad.code == 2 and "Traceback" not in bad.err
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
