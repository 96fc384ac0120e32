"""``Limited`` pairs and ``start(delay=...)`` through the public API, on every world."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from workflow import (
    AttributeConflictError,
    Limited,
    RunStatus,
    Unique,
    Worker,
    list_runs,
    start,
    step,
    workflow,
)
from workflow.policies import start_or_get_run
from worlds.protocol import World
from worlds.types import RunStarted

pytestmark = pytest.mark.anyio

running: dict[str, int] = {}
peaks: dict[str, int] = {}


@step
async def occupy(tenant: str) -> str:
    running[tenant] = running.get(tenant, 0) + 1
    peaks[tenant] = max(peaks.get(tenant, 0), running[tenant])
    try:
        await anyio.sleep(0.02)
    finally:
        running[tenant] -= 1
    return tenant


@workflow
async def tenant_job(tenant: str, n: int) -> int:
    await occupy(tenant)
    return n


@step(max_retries=0)
async def explode() -> None:
    raise RuntimeError("boom")


@workflow
async def failing_job() -> None:
    await explode()


async def test_queued_runs_all_complete_and_never_exceed_the_limit(world: World) -> None:
    runs = [
        await start(tenant_job, "acme", n, attributes={"tenant": Limited("acme", 2)}, world=world)
        for n in range(8)
    ]
    others = [
        await start(
            tenant_job, "globex", n, attributes={"tenant": Limited("globex", 1)}, world=world
        )
        for n in range(3)
    ]
    assert all([await run.status() is RunStatus.PENDING for run in runs])
    pending = await list_runs(query="status = 'pending' AND tenant = 'acme'", world=world)
    assert len(pending) == 8
    async with Worker(world, [tenant_job], concurrency=20):
        with anyio.fail_after(60):
            assert [await run.result() for run in runs] == list(range(8))
            assert [await run.result() for run in others] == list(range(3))
    assert peaks["acme"] <= 2 and peaks["globex"] <= 1
    assert await world.list_slots("tenant", "acme") == []


async def test_on_full_fail_raises_naming_a_holder_and_creates_nothing(world: World) -> None:
    holder = await start(tenant_job, "x", 0, attributes={"tenant": Limited("x", 1)}, world=world)
    with pytest.raises(AttributeConflictError) as raised:
        await start(
            tenant_job, "x", 1, attributes={"tenant": Limited("x", 1, on_full="fail")}, world=world
        )
    assert raised.value.existing_run_id == holder.id
    assert raised.value.limit == 1
    assert "full" in str(raised.value) and holder.id in str(raised.value)
    assert len(await list_runs(world=world)) == 1


async def test_a_failed_holder_frees_its_slot(world: World) -> None:
    first = await start(failing_job, attributes={"lane": Limited("l", 1)}, world=world)
    second = await start(tenant_job, "l", 7, attributes={"lane": Limited("l", 1)}, world=world)
    async with Worker(world, [failing_job, tenant_job]):
        with anyio.fail_after(30):
            assert await second.result() == 7
    assert await first.status() is RunStatus.FAILED


async def test_cancelling_a_waiting_run(world: World) -> None:
    holder = await start(tenant_job, "c", 0, attributes={"tenant": Limited("c", 1)}, world=world)
    waiter = await start(tenant_job, "c", 1, attributes={"tenant": Limited("c", 1)}, world=world)
    await waiter.cancel("not needed")
    assert await waiter.status() is RunStatus.CANCELLED
    assert [s.run_id for s in await world.list_slots("tenant", "c")] == [holder.id]


async def test_limited_goes_with_unique_pairs_and_policies(world: World) -> None:
    run = await start(
        tenant_job,
        "u",
        0,
        attributes={"tenant": Limited("u", 1), "order": Unique("o-1")},
        world=world,
    )
    again = await start_or_get_run(
        tenant_job,
        "u",
        1,
        key="order",
        value="o-1",
        attributes={"tenant": Limited("u", 1)},
        world=world,
    )
    assert again.id == run.id
    assert len(await list_runs(world=world)) == 1


async def test_bad_limits_are_refused_before_anything_is_written(world: World) -> None:
    with pytest.raises(ValueError):
        Limited("a", 0)
    with pytest.raises(ValueError):
        Limited("a", 1, on_full="drop")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Limited("a", 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await start(tenant_job, "a", 0, attributes={"$name": Limited("n", 1)}, world=world)
    assert len(await list_runs(world=world)) == 0


async def test_delayed_start_stays_pending_until_due(world: World) -> None:
    asked = datetime.now(UTC)
    run = await start(tenant_job, "d", 3, delay=1.5, world=world)
    async with Worker(world, [tenant_job], poll_interval=0.05):
        await anyio.sleep(0.3)
        assert await run.status() is RunStatus.PENDING
        with anyio.fail_after(30):
            assert await run.result() == 3
    started = (await run.events())[1]
    assert isinstance(started, RunStarted)
    assert (started.at - asked).total_seconds() >= 1.45  # 1.5, less a PostgreSQL clock estimate


async def test_delay_is_checked(world: World) -> None:
    for bad in (-1, float("nan")):
        with pytest.raises(ValueError):
            await start(tenant_job, "d", 0, delay=bad, world=world)
    with pytest.raises(TypeError):
        await start(tenant_job, "d", 0, delay="soon", world=world)  # type: ignore[arg-type]
    assert len(await list_runs(world=world)) == 0


async def test_a_start_asking_another_limit_of_a_held_pair_is_refused(world: World) -> None:
    """The pair's limit is fixed by the runs holding it (issue 33, item 2)."""
    holder = await start(tenant_job, "p", 0, attributes={"tenant": Limited("p", 1)}, world=world)
    for other in (2, 3):
        with pytest.raises(ValueError, match=r"tenant='p' is limited to 1 .* but 2 was asked"):
            await start(tenant_job, "p", 1, attributes={"tenant": Limited("p", 2)}, world=world)
        with pytest.raises(ValueError, match="limited to 1"):
            await start(
                tenant_job, "p", 1, attributes={"tenant": Limited("p", other, "fail")}, world=world
            )
    assert [r.id for r in await list_runs(world=world)] == [holder.id]  # nothing written
    waiter = await start(tenant_job, "p", 2, attributes={"tenant": Limited("p", 1)}, world=world)
    async with Worker(world, [tenant_job]):
        with anyio.fail_after(30):
            assert await holder.result() == 0 and await waiter.result() == 2
        wider = await start(
            tenant_job, "p", 3, attributes={"tenant": Limited("p", 2)}, world=world
        )  # the pair is empty again: a new limit may start it
        with anyio.fail_after(30):
            assert await wider.result() == 3
