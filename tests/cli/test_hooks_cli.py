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
                while True:
                    listed = await anyio.to_thread.run_sync(wf, "hooks", "list", "--world", url,
                                                            "--json")  # fmt: skip
                    hooks = json.loads(listed.stdout)
                    if hooks:
                        break
                    await anyio.sleep(0.1)
            assert hooks[0]["token"] == "approve-42"
            assert hooks[0]["run_id"] == run.id
            assert hooks[0]["attributes"] == {"kind": "approval"}
            for _ in range(2):  # the same resume id twice: delivered once
                resumed = await anyio.to_thread.run_sync(
                    wf, "hooks", "resume", "approve-42", '{"ok": true}', "--resume-id", "r1",
                    "--world", url,
                )  # fmt: skip
                assert resumed.returncode == 0, resumed.stderr
                assert run.id in resumed.stdout
            assert await run.result(timeout=20) == {"ok": True}
            received = [e for e in await run.events() if isinstance(e, HookReceived)]
            assert len(received) == 1
        unknown = await anyio.to_thread.run_sync(wf, "hooks", "resume", "approve-42", "1",
                                                 "--world", url)  # fmt: skip
        assert unknown.returncode == 1 and "no live hook" in unknown.stderr
        bad = await anyio.to_thread.run_sync(wf, "hooks", "resume", "x", "{nope", "--world", url)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
