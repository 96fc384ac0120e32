"""``wf ui``: what it refuses, and the server it runs."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

import worlds
from cli.main import app
from cli.ui import is_loopback
from tests.apps.uiapp import approval
from workflow import start


def test_a_public_bind_needs_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    result = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--world", url], env={})
    assert result.exit_code == 2
    assert "pass --token" in result.output
    assert not (tmp_path / "world.db").exists()


def test_a_memory_world_is_refused() -> None:
    result = CliRunner().invoke(app, ["ui", "--world", "memory://"])
    assert result.exit_code == 1  # as every command that needs an existing world
    assert "memory:// is a new, empty world" in result.output


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("0.0.0.0", False), ("10.0.0.1", False), ("example.org", False)],
)  # fmt: skip
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _first_answer(server: subprocess.Popen[str], url: str) -> tuple[int, str]:
    """GET ``url`` once the server listens (within 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _get(url)
        except OSError:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            assert time.monotonic() < deadline, "wf ui did not start within 60 s"
            time.sleep(0.2)


@pytest.mark.slow
def test_wf_ui_serves_the_world(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/world.db"

    async def seed() -> str:
        async with worlds.open(url) as world:
            return (await start(approval, "o-1", world=world)).id

    run_id = asyncio.run(seed())
    port = _free_port()
    env = {**os.environ, "WF_UI_TOKEN": "t0ken", "WORKFLOW_WORLD": url}
    command = [sys.executable, "-m", "cli", "ui", "--port", str(port), "--read-only"]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        status, _ = _first_answer(server, base + "/api/runs")
        assert status == 401  # the token from $WF_UI_TOKEN is required
        status, body = _get(base + "/api/runs", "t0ken")
        assert status == 200
        assert [run["id"] for run in json.loads(body)["runs"]] == [run_id]
        status, page = _get(base + f"/runs/{run_id}", "t0ken")
        assert status == 200 and "read-only" in page and "cancel-form" not in page
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.parametrize("token", [" ", "\t  "])
def test_a_blank_token_is_a_cli_usage_error(tmp_path: Path, token: str) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    for options, env in ((["--token", token], {}), ([], {"WF_UI_TOKEN": token})):
        result = CliRunner().invoke(app, ["ui", *options, "--world", url], env=env)
        assert result.exit_code == 2, result.output
        assert "--token" in result.output and "blank" in result.output
        assert "pass None" not in result.output


@pytest.mark.slow
@pytest.mark.parametrize("host", ["127.0.0.2", "127.1.2.3"])
def test_wf_ui_answers_on_any_loopback_address(tmp_path: Path, host: str) -> None:
    url = f"sqlite:///{tmp_path}/world.db"
    asyncio.run(_migrate(url))
    port = _free_port()
    env = {**os.environ, "WORKFLOW_WORLD": url}
    env.pop("WF_UI_TOKEN", None)
    command = [sys.executable, "-m", "cli", "ui", "--host", host, "--port", str(port)]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://{host}:{port}"
        status, body = _first_answer(server, base + "/api/runs")
        assert status == 200, body
        assert json.loads(body)["runs"] == []
        request = urllib.request.Request(base + "/api/runs", headers={"Host": "evil.example"})
        try:
            urllib.request.urlopen(request, timeout=10)
            refused = 200
        except urllib.error.HTTPError as error:
            refused = error.code
        assert refused == 421  # still only loopback hosts
    finally:
        server.terminate()
        server.wait(30)


async def _migrate(url: str) -> None:
    async with worlds.open(url) as world:
        await world.migrate()
