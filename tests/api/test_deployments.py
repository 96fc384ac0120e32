"""Pinned deployments through the public API (RFC 0025): ``Worker(build_id=...)``,
``@workflow(pin=...)``, ``workflow.deployments``, and ``wf deployments`` / ``wf worker
--build-id`` on an SQLite file. The cross-process story is
``tests/system/test_deployment_processes.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import worlds
from workflow import Run, Worker, create_hook, resume_hook, start, step, workflow
from workflow.deployments import drained, get_deployment, list_deployments
from worlds.types import HookCreated, StepCompleted

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@step
async def touch(n: int) -> int:
    return n


@workflow(name="deploy-api-pinned")
async def pinned_flow(token: str) -> int:
    first = await touch(1)
    await create_hook(token)
    return first + await touch(2)


@workflow(name="deploy-api-moving", pin="latest")
async def moving_flow(token: str) -> int:
    first = await touch(1)
    await create_hook(token)
    return first + await touch(2)


GATE: dict[str, anyio.Event] = {}
"""Per test: set when the gated step may return."""


@step
async def gated(n: int) -> int:
    await GATE["open"].wait()
    return n


@workflow(name="deploy-api-steps", pin="latest")
async def steps_flow() -> int:
    """Two steps back to back: the second is the run's next task after the first."""
    return await gated(1) + await touch(2)


async def _hooked(run: Run[Any]) -> None:
    with anyio.fail_after(60):
        while not any(isinstance(e, HookCreated) for e in await run.events()):
            await anyio.sleep(0.01)


async def _builds(run: Run[Any]) -> list[str | None]:
    return [e.build_id for e in await run.events() if isinstance(e, StepCompleted)]


def test_a_pin_is_run_or_latest() -> None:
    assert pinned_flow.pin == "run" and moving_flow.pin == "latest"
    with pytest.raises(ValueError, match="'run' or 'latest'"):
        workflow(pin="sometimes")(pinned_flow.fn)  # type: ignore[call-overload]


async def test_two_builds_in_one_world(tmp_path: Path) -> None:
    """Runs started on v1 finish on v1, a latest run moves to v2, new runs go to v2,
    and v1 is drained once its pinned runs closed."""
    fns = [pinned_flow, moving_flow]
    async with worlds.open(f"sqlite:///{tmp_path}/w.db") as world:
        async with Worker(world, fns, build_id="v1", poll_interval=0.02) as v1:
            assert v1.build_id == "v1"
            old = await start(pinned_flow, "a-old", world=world)
            moving = await start(moving_flow, "a-moving", world=world)
            await _hooked(old)
            await _hooked(moving)
            async with Worker(world, fns, build_id="v2", poll_interval=0.02):
                new = await start(pinned_flow, "a-new", world=world)
                await _hooked(new)
                record = await get_deployment("v1", world=world)
                assert record is not None and (record.open_runs, record.pinned_runs) == (2, 1)
                assert not await drained("v1", world=world)
                for token in ("a-old", "a-moving", "a-new"):
                    await resume_hook(token, None, world=world)
                for run in (old, moving, new):
                    assert await run.result(timeout=60) == 3
                assert await _builds(old) == ["v1", "v1"]
                assert await _builds(moving) == ["v1", "v2"]
                assert await _builds(new) == ["v2", "v2"]
                assert await drained("v1", world=world)
                listed = await list_deployments(world=world)
                assert [(d.build_id, d.newest, d.live_workers) for d in listed] == [
                    ("v2", True, 1),
                    ("v1", False, 1),
                ]
        assert (await world.get_run(old.id)).build_id == "v1"  # type: ignore[union-attr]
        assert (await world.get_run(moving.id)).build_id == "v2"  # type: ignore[union-attr]


async def test_a_latest_run_moves_between_two_steps(tmp_path: Path) -> None:
    """A ``pin="latest"`` run whose step finishes on v1 after v2 started continues on
    v2: v1 neither leases its workflow item back nor runs the next task in the step's
    own transaction (it would keep the run on v1 step after step)."""
    GATE["open"] = anyio.Event()
    fns = [steps_flow]
    async with worlds.open(f"sqlite:///{tmp_path}/w.db") as world:
        async with Worker(world, fns, build_id="v1", poll_interval=0.02):
            run = await start(steps_flow, world=world)
            with anyio.fail_after(60):
                while not [e for e in await run.events() if type(e).__name__ == "StepStarted"]:
                    await anyio.sleep(0.01)
            async with Worker(world, fns, build_id="v2", poll_interval=0.02):
                with anyio.fail_after(60):
                    while not (record := await get_deployment("v2", world=world)) or not (
                        record.newest
                    ):
                        await anyio.sleep(0.01)
                GATE["open"].set()  # the first step returns on v1
                assert await run.result(timeout=60) == 3
        assert await _builds(run) == ["v1", "v2"]


async def test_without_a_build_id_nothing_is_pinned(tmp_path: Path) -> None:
    async with worlds.open(f"sqlite:///{tmp_path}/w.db") as world:
        async with Worker(world, [pinned_flow], poll_interval=0.02) as plain:
            assert plain.build_id is None
            run = await start(pinned_flow, "b-plain", world=world)
            await _hooked(run)
            await resume_hook("b-plain", None, world=world)
            assert await run.result(timeout=60) == 3
        assert await _builds(run) == [None, None]
        assert (await world.get_run(run.id)).build_id is None  # type: ignore[union-attr]
        assert await list_deployments(world=world) == []


def _wf(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("WORKFLOW_BUILD_ID", None)
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


async def test_the_cli_lists_drains_and_refuses_another_codebase(tmp_path: Path) -> None:
    """``wf deployments list|drain`` and ``wf worker --build-id`` on one file: a run
    pinned to a stopped build shows as waiting, drain exits 1 until it closes, and a
    worker under that build id with other workflow names is refused."""
    url = f"sqlite:///{tmp_path}/w.db"
    async with worlds.open(url) as world:
        assert await list_deployments(world=world) == []  # the file exists from here
        assert "no build ids registered" in _wf("deployments", "list", "--world", url).stdout
        unknown = _wf("deployments", "drain", "v9", "--world", url)
        assert unknown.returncode == 0 and "unknown" in unknown.stdout
        async with Worker(world, [pinned_flow], build_id="v1", poll_interval=0.02):
            run = await start(pinned_flow, "c-cli", world=world)
            await _hooked(run)
        shown = _wf("runs", "show", run.id, "--world", url)
        assert "waiting for a worker of build v1" in shown.stdout, shown.stdout
        busy = _wf("deployments", "drain", "v1", "--world", url)
        assert busy.returncode == 1 and "1 open run(s) still need it" in busy.stdout
        waited = _wf("deployments", "drain", "v1", "--wait", "--timeout", "0.5", "--world", url)
        assert waited.returncode == 1
        listed = _wf("deployments", "list", "--world", url)
        assert listed.returncode == 0 and "v1" in listed.stdout
        assert "deploy-api-pinned" in listed.stdout
        refused = _wf("worker", "tests.apps.deployapp", "--build-id", "v1", "--world", url)
        assert refused.returncode == 1, refused.stderr
        assert "refused" in refused.stderr and "other workflows" in refused.stderr
        async with Worker(world, [pinned_flow], build_id="v1", poll_interval=0.02):
            await resume_hook("c-cli", None, world=world)
            assert await run.result(timeout=60) == 3
        done = _wf("deployments", "drain", "v1", "--world", url)
        assert done.returncode == 0 and "is drained" in done.stdout


def test_the_example_prints_where_each_step_ran() -> None:
    done = subprocess.run(
        [sys.executable, "examples/deployments.py"], cwd=ROOT, capture_output=True, text=True,
        timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "o-1: steps ran on v1, v1",
        "u-1: steps ran on v1, v2",
        "o-2: steps ran on v2, v2",
    ]
    assert done.stdout.splitlines()[-1] == "v1 drained: True"
