"""Temporal's start policies over unique attributes: the table, concurrency, fencing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from workflow import (
    RunAlreadyStartedError,
    RunCancelledError,
    RunFailedError,
    RunStatus,
    Unique,
    Worker,
    continue_as_new,
    find_run,
    get_step_metadata,
    list_runs,
    start,
    step,
    workflow,
)
from workflow.policies import (
    ConflictPolicy,
    ReusePolicy,
    start_or_cancel_run,
    start_or_get_run,
    start_with_policy,
)
from worlds.protocol import World
from worlds.types import RunCancelled, StepStarted

pytestmark = pytest.mark.anyio

gate: dict[str, anyio.Event] = {}


@step
async def wait_for_gate(name: str) -> str:
    await gate[name].wait()
    return name


@workflow
async def gated(name: str) -> str:
    return await wait_for_gate(name)


@step(max_retries=0)
async def explode() -> None:
    raise RuntimeError("boom")


@workflow
async def quick(outcome: str) -> str:
    if outcome == "fail":
        await explode()
    return outcome


@dataclass(frozen=True)
class Row:
    """One row of the policy table in temporal-workflow-id-policies.txt section 3."""

    holder: str  # running | completed | failed | cancelled
    conflict: ConflictPolicy
    reuse: ReusePolicy
    error: bool
    expect: str  # existing | error | new | new+cancelled


TABLE = [
    Row("running", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE, False, "existing"),
    Row("running", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE, True, "error"),
    Row("running", ConflictPolicy.USE_EXISTING, ReusePolicy.ALLOW_DUPLICATE, True, "existing"),
    Row("running", ConflictPolicy.USE_EXISTING, ReusePolicy.ALLOW_DUPLICATE, False, "existing"),
    Row(
        "running", ConflictPolicy.TERMINATE_EXISTING, ReusePolicy.ALLOW_DUPLICATE, False,
        "new+cancelled",
    ),
    Row("completed", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE, False, "new"),
    Row("completed", ConflictPolicy.FAIL, ReusePolicy.REJECT_DUPLICATE, False, "existing"),
    Row("completed", ConflictPolicy.FAIL, ReusePolicy.REJECT_DUPLICATE, True, "error"),
    Row(
        "completed", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, True, "error"
    ),
    # the rows the table implies: failed or cancelled holders may be replaced
    Row("failed", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, True, "new"),
    Row("cancelled", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, True, "new"),
    Row("completed", ConflictPolicy.FAIL, ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY, False,
        "existing"),
    Row("completed", ConflictPolicy.USE_EXISTING, ReusePolicy.REJECT_DUPLICATE, True, "error"),
    Row("completed", ConflictPolicy.TERMINATE_EXISTING, ReusePolicy.ALLOW_DUPLICATE, False, "new"),
]  # fmt: skip


async def make_holder(world: World, state: str, value: str) -> Any:
    gate[value] = anyio.Event()
    if state == "running":
        run = await start(gated, value, attributes={"job": _unique(value)}, world=world)
        with anyio.fail_after(5):
            while await run.status() is not RunStatus.RUNNING:
                await anyio.sleep(0.01)
        return run
    run = await start(
        quick,
        "fail" if state == "failed" else "ok",
        attributes={"job": _unique(value)},
        world=world,
    )
    if state == "cancelled":
        await run.cancel("operator", grace=None)
    elif state == "failed":
        with pytest.raises(RunFailedError):
            await run.result(timeout=10)
    else:
        await run.result(timeout=10)
    assert (await run.status()).value == state
    return run


def _unique(value: str) -> Unique[str]:
    return Unique(value)


@pytest.mark.parametrize("row", TABLE, ids=lambda r: f"{r.holder}-{r.conflict.name}-"
                         f"{r.reuse.name}-{'err' if r.error else 'noerr'}")  # fmt: skip
async def test_policy_table(world: World, row: Row) -> None:
    value = f"v-{id(row)}"
    async with Worker(world, [gated, quick], lease_seconds=0.5):
        holder = await make_holder(world, row.holder, value)
        attempt = start_with_policy(
            quick,
            "ok",
            key="job",
            value=value,
            conflict=row.conflict,
            reuse=row.reuse,
            error_when_already_started=row.error,
            world=world,
        )
        if row.expect == "error":
            with pytest.raises(RunAlreadyStartedError) as info:
                await attempt
            assert info.value.existing_run == holder
            assert await find_run("job", value, world=world) == holder
        elif row.expect == "existing":
            assert await attempt == holder
            assert await find_run("job", value, world=world) == holder
        else:
            new = await attempt
            assert new != holder
            assert await find_run("job", value, world=world) == new
            assert await new.result(timeout=10) == "ok"
            assert await holder.claim("job") is None  # the claim moved, with a new generation
            new_claim = await new.claim("job")
            assert new_claim is not None and new_claim.generation == 2
            if row.expect == "new+cancelled":
                assert await holder.status() is RunStatus.CANCELLED
                with pytest.raises(RunCancelledError, match="superseded"):
                    await holder.result(timeout=1)
            else:
                assert await holder.status() is RunStatus(row.holder)
        gate[value].set()
    runs_for_value = await list_runs(attributes={"job": value}, world=world)
    expected_runs = 1 if row.expect in ("error", "existing") else 2
    assert len(runs_for_value) == expected_runs


async def test_start_or_get_run_gives_everyone_the_same_run(world: World) -> None:
    executions: list[str] = []

    @step(name="count_execution")
    async def count_execution() -> str:
        executions.append(get_step_metadata().run_id)
        return "done"

    @workflow(name="once_only")
    async def once_only() -> str:
        return await count_execution()

    handles: list[Any] = []

    async def caller() -> None:
        handles.append(await start_or_get_run(once_only, key="invoice", value="i-1", world=world))

    async with Worker(world, [once_only, count_execution]):
        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(caller)
        assert len(set(handles)) == 1
        assert await handles[0].result(timeout=10) == "done"
        later = await start_or_get_run(once_only, key="invoice", value="i-1", world=world)
    assert later == handles[0]
    assert executions == [handles[0].id]
    assert len(await list_runs(world=world)) == 1


async def test_start_or_cancel_run_leaves_one_live_run(world: World) -> None:
    gate["plan"] = anyio.Event()
    handles: list[Any] = []

    async def caller(i: int) -> None:
        handles.append(
            await start_or_cancel_run(gated, "plan", key="order", value="o-9", world=world)
        )

    async with Worker(world, [gated], lease_seconds=0.5):
        async with anyio.create_task_group() as group:
            for i in range(20):
                group.start_soon(caller, i)
        holder = await find_run("order", "o-9", world=world)
        assert holder is not None
        statuses = {run.id: await run.status() for run in handles}
        live = [rid for rid, s in statuses.items() if not s.is_closed]
        assert live == [holder.id]
        assert sum(s is RunStatus.CANCELLED for s in statuses.values()) == 19
        gate["plan"].set()
        assert await holder.result(timeout=10) == "plan"
    # no step of a cancelled run started after its cancellation was committed
    for run in handles:
        if run == holder:
            continue
        events = await run.events()
        cancelled_at = next(e.at for e in events if isinstance(e, RunCancelled))
        assert all(e.at <= cancelled_at for e in events if isinstance(e, StepStarted))


async def test_policy_arguments_are_checked_before_writing(world: World) -> None:
    with pytest.raises(TypeError):
        await start_with_policy(quick, "ok", key="job", value=[1], world=world)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await start_with_policy(quick, "ok", key="$bad", value="x", world=world)
    with pytest.raises(ValueError):
        await start_with_policy(
            quick, "ok", key="job", value="x", attributes={"job": "y"}, world=world
        )
    with pytest.raises(TypeError):
        await start_with_policy(quick, "ok", key="job", value="x", conflict="fail", world=world)  # type: ignore[arg-type]
    assert len(await list_runs(world=world)) == 0


@step
async def bump(x: int) -> int:
    return x + 1


@workflow
async def counter(value: int, stop: int) -> int:
    value = await bump(value)
    if value < stop:
        continue_as_new(value, stop)
    return value


async def test_continue_as_new_moves_claims_to_the_newest_run(world: World) -> None:
    async with Worker(world, [counter]):
        first = await start(counter, 0, 3, attributes={"counter": Unique("c-1")}, world=world)
        assert await first.result(timeout=10) == 3
    assert await first.status() is RunStatus.CONTINUED
    newest = await find_run("counter", "c-1", world=world)
    assert newest is not None and newest != first
    assert await newest.status() is RunStatus.COMPLETED
    assert await newest.attributes() == {"counter": "c-1"}
    (claim,) = await newest.claims()
    assert (claim.key, claim.generation, claim.step) == ("counter", 3, None)  # two takeovers
    assert await first.claims() == []
    chain = await list_runs(attributes={"counter": "c-1"}, world=world)
    assert len(chain) == 3
    assert [await r.status() for r in chain] == [
        RunStatus.COMPLETED,
        RunStatus.CONTINUED,
        RunStatus.CONTINUED,
    ]
