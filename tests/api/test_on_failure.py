"""``@workflow(on_failure=handler)``: a failed run starts its handler once (issue 28, item 3).

In the spirit of Inngest's ``on_failure`` tests: the handler runs as a workflow
with the failed run's id and error after the run fails; a cancelled run starts
none, a failing handler starts no handler of its own, and the handler is
started once per failed run, also when the failing commit is tried again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from workflow import (
    RunFailedError,
    RunStatus,
    Worker,
    create_hook,
    get_run,
    start,
    step,
    workflow,
)
from worlds.protocol import World
from worlds.query import AttrRef, Compare, RunQuery
from worlds.semantics import ON_FAILURE_OF_KEY, handler_run_id
from worlds.types import RunFailed

pytestmark = pytest.mark.anyio


@step
async def note(text: str) -> str:
    return text


@step
async def status_of(run_id: str) -> str:
    return (await get_run(run_id).status()).value


@workflow
async def report_failure(run_id: str, error: dict[str, str]) -> dict[str, Any]:
    await note(f"paged about {run_id}")
    return {"run_id": run_id, "error": error, "status": await status_of(run_id)}


@workflow(on_failure=report_failure)
async def charge(amount: int) -> int:
    await note("charging")
    if amount < 0:
        raise ValueError(f"cannot charge {amount}")
    return amount


@workflow(on_failure=report_failure)
async def waits_for_cancel() -> None:
    await create_hook()


@workflow
async def broken_handler(run_id: str, error: dict[str, str]) -> None:
    raise RuntimeError(f"the handler of {run_id} broke too")


@workflow(on_failure=broken_handler)
async def fails_into_broken_handler() -> None:
    raise KeyError("first failure")


@workflow(on_failure=report_failure)  # a handler with a handler of its own: never chained
async def failing_handler_with_handler(run_id: str, error: dict[str, str]) -> None:
    raise RuntimeError(f"cannot handle {error['type']}")


@workflow(on_failure=failing_handler_with_handler)
async def fails_into_chain() -> None:
    raise LookupError("x")


async def _handlers_of(world: World, run_id: str) -> list[str]:
    """The ids of the runs whose ``$on_failure_of`` names ``run_id``."""
    where = Compare(AttrRef(ON_FAILURE_OF_KEY), "=", run_id)
    return [r.id for r in (await world.list_runs(RunQuery(where=where))).runs]


async def test_a_failed_run_starts_its_handler_with_its_id_and_error(world: World) -> None:
    async with Worker(world, [charge]):  # the handler comes with the workflow
        ok = await start(charge, 5, world=world)
        bad = await start(charge, -3, world=world)
        assert await ok.result(timeout=60) == 5
        with pytest.raises(RunFailedError):
            await bad.result(timeout=60)
        handler = get_run(handler_run_id(bad.id), world=world)
        outcome = await handler.result(timeout=60)
    assert outcome == {
        "run_id": bad.id,
        "error": {"type": "ValueError", "message": "cannot charge -3", "workflow": "charge"},
        "status": "failed",  # the handler starts once the failure is stored
    }
    assert await _handlers_of(world, bad.id) == [handler.id]
    assert await _handlers_of(world, ok.id) == []
    assert (await handler.attributes())[ON_FAILURE_OF_KEY] == bad.id
    failed = [e for e in await bad.events() if isinstance(e, RunFailed)]
    assert len(failed) == 1 and failed[0].handler is not None
    assert failed[0].handler.workflow == "report_failure"


async def test_a_cancelled_run_starts_no_handler(world: World) -> None:
    async with Worker(world, [waits_for_cancel]):
        run = await start(waits_for_cancel, world=world)
        with anyio.fail_after(60):
            while not await world.list_hooks(run.id):
                await anyio.sleep(0.05)
        await run.cancel(reason="not needed")
        with anyio.fail_after(60):
            while await run.status() is not RunStatus.CANCELLED:
                await anyio.sleep(0.05)
    assert await _handlers_of(world, run.id) == []
    assert await world.get_run(handler_run_id(run.id)) is None


async def test_a_failed_handler_starts_no_handler_of_its_own(world: World) -> None:
    async with Worker(world, [fails_into_broken_handler, fails_into_chain]):
        first = await start(fails_into_broken_handler, world=world)
        second = await start(fails_into_chain, world=world)
        for run in (first, second):
            with pytest.raises(RunFailedError):
                await run.result(timeout=60)
        handler = get_run(handler_run_id(first.id), world=world)
        with pytest.raises(RunFailedError, match="broke too"):
            await handler.result(timeout=60)
        # the chain's handler fails; being a handler run, it starts no report_failure
        chained = get_run(handler_run_id(second.id), world=world)
        with pytest.raises(RunFailedError, match="cannot handle LookupError"):
            await chained.result(timeout=60)
    assert await _handlers_of(world, handler.id) == []
    assert await _handlers_of(world, chained.id) == []
    assert await world.get_run(handler_run_id(handler.id)) is None
    assert await world.get_run(handler_run_id(chained.id)) is None


async def test_a_retried_run_that_fails_again_starts_no_second_handler(world: World) -> None:
    async with Worker(world, [charge]):
        bad = await start(charge, -1, world=world)
        with pytest.raises(RunFailedError):
            await bad.result(timeout=60)
        handler = get_run(handler_run_id(bad.id), world=world)
        await handler.result(timeout=60)
        await bad.retry()
        with pytest.raises(RunFailedError):
            await bad.result(timeout=60)
    assert len([e for e in await bad.events() if isinstance(e, RunFailed)]) == 2
    assert await _handlers_of(world, bad.id) == [handler.id]


async def test_many_failing_runs_on_two_workers_start_one_handler_each(world: World) -> None:
    async with Worker(world, [charge]), Worker(world, [charge]):
        runs = [await start(charge, -n, world=world) for n in range(1, 13)]
        for run in runs:
            with pytest.raises(RunFailedError):
                await run.result(timeout=120)
        for run in runs:
            assert (await get_run(handler_run_id(run.id), world=world).result(timeout=120))[
                "run_id"
            ] == run.id
    for run in runs:
        assert len(await _handlers_of(world, run.id)) == 1


def test_on_failure_must_be_a_workflow_taking_run_id_and_error() -> None:
    async def plain(run_id: str, error: dict[str, str]) -> None:
        return None

    with pytest.raises(TypeError, match="on_failure"):
        workflow(on_failure=plain)(plain)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"handler\(run_id, error\)"):
        workflow(on_failure=charge)(plain)


def test_the_example_runs_its_handler_once() -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "examples/failure_alerts.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['charging', 'charged 4242-4242']"
    assert sum(line.startswith("ALERT: charge run ") for line in lines) == 1
    assert lines[-1].startswith("handled: charge run ") and "declined" in lines[-1]
